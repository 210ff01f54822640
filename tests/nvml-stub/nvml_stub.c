/*
 * nvml_stub.c: a stand-in for NVIDIA's libnvidia-ml.so.1, for tests on machines without a GPU.
 *
 * The agent reads its GPUs through the `nvml-wrapper` crate, which dlopens the bare name
 * `libnvidia-ml.so.1` and looks each function up when it is first called. Built as that file
 * into a directory on LD_LIBRARY_PATH, this library answers those calls, so the agent's real
 * NVML path (agent/src/gpu/nvml.rs) and scripts/gpu-check.sh run end to end without a GPU
 * (tests/tests/gpu_nvml.rs builds it with `cc -shared -fPIC -O1`). It exports exactly what the
 * agent's NVML path calls, written from NVML's public API documentation:
 *
 *   nvmlInit_v2, nvmlInitWithFlags, nvmlShutdown, nvmlErrorString, nvmlSystemGetDriverVersion
 *   (read by nvml-wrapper's init), nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 *   nvmlDeviceGetHandleByUUID, nvmlDeviceGetUUID, nvmlDeviceGetName,
 *   nvmlDeviceGetMemoryInfo_v2 (what nvml-wrapper 0.13's memory_info calls; the struct carries
 *   its version, checked here as the driver does) and nvmlDeviceGetMemoryInfo,
 *   nvmlDeviceGetMinorNumber, nvmlDeviceGetComputeRunningProcesses_v3 (first called with a
 *   count of 0 and no buffer, to learn the count) and nvmlDeviceGetUtilizationRates.
 *
 * Configured by the environment, read by the first nvmlInit:
 *
 *   PARLEY_NVML_STUB_GPUS=N        devices 0..N-1 (default 1, at most 16): model
 *                                  "NVIDIA H100 80GB HBM3", 81559 MiB, UUID GPU-stub-<i>,
 *                                  minor number i
 *   PARLEY_NVML_STUB_FAIL_INIT=1   nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   PARLEY_NVML_STUB_BUSY_DIR=DIR  device <uuid> runs one compute process only while the file
 *                                  DIR/<uuid> exists; unset: every device always runs one
 *
 * A device's compute process (pid 4242) uses (index + 1) * 512 MiB, so a figure tells which
 * device it came from; a busy device reports 50 % GPU utilisation, an idle one 0 %.
 *
 * What it cannot show: that the real driver answers the same way, real /dev/nvidia* nodes,
 * and cgroup device isolation. Those need the run on a real GPU machine.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 16
#define MIB (1024ULL * 1024ULL)
#define MEMORY_MIB 81559ULL
#define PROCESS_MIB 512ULL
#define PROCESS_PID 4242U
#define BUSY_UTILIZATION 50U
#define MODEL "NVIDIA H100 80GB HBM3"
#define DRIVER_VERSION "550.54.15"

/* The device handle NVML hands out is an opaque pointer; here it points into this table. */
struct stub_device {
    unsigned int index;
    char uuid[32];
};
typedef struct stub_device *nvmlDevice_t;

/* The layouts of NVML's public structs. */
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

/* NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version in the top byte. */
#define MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2U << 24)))

static struct stub_device devices[MAX_GPUS];
static unsigned int device_count;
static int init_count;
static int configured;

static void configure(void)
{
    const char *n = getenv("PARLEY_NVML_STUB_GPUS");
    long count = n && *n ? strtol(n, NULL, 10) : 1;
    if (count < 0)
        count = 0;
    if (count > MAX_GPUS)
        count = MAX_GPUS;
    device_count = (unsigned int)count;
    for (unsigned int i = 0; i < device_count; i++) {
        devices[i].index = i;
        snprintf(devices[i].uuid, sizeof devices[i].uuid, "GPU-stub-%u", i);
    }
    configured = 1;
}

static int valid(nvmlDevice_t d)
{
    return init_count > 0 && d >= devices && d < devices + device_count;
}

/* Whether the device runs its compute process now (see PARLEY_NVML_STUB_BUSY_DIR). */
static int busy(nvmlDevice_t d)
{
    const char *dir = getenv("PARLEY_NVML_STUB_BUSY_DIR");
    if (!dir || !*dir)
        return 1;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, d->uuid) >= (int)sizeof path)
        return 0;
    return access(path, F_OK) == 0;
}

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
    const char *fail = getenv("PARLEY_NVML_STUB_FAIL_INIT");
    if (fail && strcmp(fail, "1") == 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (!configured)
        configure();
    init_count++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument Version Mismatch";
    default:
        return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(DRIVER_VERSION, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < device_count; i++) {
        if (strcmp(devices[i].uuid, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    return copy_string(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    return copy_string(MODEL, name, length);
}

static unsigned long long used_bytes(nvmlDevice_t device)
{
    return busy(device) ? (device->index + 1ULL) * PROCESS_MIB * MIB : 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = MEMORY_MIB * MIB;
    memory->used = used_bytes(device);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != MEMORY_V2_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = MEMORY_MIB * MIB;
    memory->reserved = 0;
    memory->used = used_bytes(device);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minor = device->index;
    return NVML_SUCCESS;
}

/* As documented: *infoCount in is the buffer's length; too short (0 with no buffer asks for
 * the count) answers NVML_ERROR_INSUFFICIENT_SIZE with the count needed, none running answers
 * success and 0. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (!infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int running = busy(device) ? 1 : 0;
    if (*infoCount < running) {
        *infoCount = running;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (running > 0 && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    *infoCount = running;
    if (running > 0) {
        infos[0].pid = PROCESS_PID;
        infos[0].usedGpuMemory = used_bytes(device);
        /* 0xFFFFFFFF: no MIG instance, as on a GPU without MIG. */
        infos[0].gpuInstanceId = 0xFFFFFFFFU;
        infos[0].computeInstanceId = 0xFFFFFFFFU;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    if (!valid(device))
        return init_count ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (!utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    utilization->gpu = busy(device) ? BUSY_UTILIZATION : 0;
    utilization->memory = busy(device) ? BUSY_UTILIZATION / 2 : 0;
    return NVML_SUCCESS;
}
