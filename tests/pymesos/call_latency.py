# Latency of Mesos calls vs the native API on one kept-alive connection (as pymesos sends them).
# Usage: python3 call_latency.py HOST PORT N   (against a coordinator with no credentials)
import http.client, json, sys, time, socket
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection((host, port))
body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "root", "name": "bench"}}})
s.sendall(("POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(4096)
stream_id = [l.split(b": ")[1].decode() for l in head.split(b"\r\n") if l.lower().startswith(b"mesos-stream-id")][0]
buf = head.split(b"\r\n\r\n", 1)[1]
while b"framework_id" not in buf:
    buf += s.recv(4096)
import re; fw = re.search(rb"\"framework_id\":\{\"value\":\"([0-9a-f-]+)\"", buf).group(1).decode()
c = http.client.HTTPConnection(host, port)
def bench(path, payload, headers):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("POST", path, body=payload, headers=headers)
        r = c.getresponse(); r.read()
        assert 200 <= r.status < 300, r.status
        lat.append(time.perf_counter() - t)
    lat.sort()
    return "p50 %.3f ms  p99 %.3f ms" % (lat[n // 2] * 1e3, lat[int(n * 0.99)] * 1e3)
h = {"Content-Type": "application/json"}
print("mesos  REVIVE  ", bench("/api/v1/scheduler", json.dumps({"type": "REVIVE", "framework_id": {"value": fw}}), dict(h, **{"Mesos-Stream-Id": stream_id})))
print("native revive  ", bench("/api/v1/frameworks/%s/revive" % fw, "{}", h))
print("mesos  RECONCILE", bench("/api/v1/scheduler", json.dumps({"type": "RECONCILE", "framework_id": {"value": fw}, "reconcile": {"tasks": []}}), dict(h, **{"Mesos-Stream-Id": stream_id})))
