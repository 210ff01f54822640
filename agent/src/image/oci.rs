//! OCI image layouts on disk: `oci-layout`, `index.json` → manifest → layers, each a blob under
//! `blobs/sha256/`. Layers are `tar` or `tar+gzip` (OCI or Docker media types), checked against
//! their digests and applied in order.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{archive, digest, ImageError};

/// How deep an index may point at further indexes.
const MAX_INDEX_DEPTH: usize = 4;

/// A content descriptor (the fields used here).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    platform: Option<Platform>,
}

/// A manifest's platform.
#[derive(Debug, Deserialize)]
struct Platform {
    #[serde(default)]
    os: String,
    #[serde(default)]
    architecture: String,
}

/// `index.json`, or an index blob.
#[derive(Debug, Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

/// An image manifest.
#[derive(Debug, Deserialize)]
struct Manifest {
    layers: Vec<Descriptor>,
}

/// `oci-layout`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layout {
    image_layout_version: String,
}

/// One layer blob to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layer {
    /// The blob.
    pub path: PathBuf,
    /// Its SHA-256 (hex), checked before it is applied.
    pub sha256: String,
    /// Whether it is gzip-compressed.
    pub gzip: bool,
}

/// An image read from a layout: its manifest's digest (the cache key) and its layers in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OciImage {
    /// SHA-256 (hex) of the chosen manifest.
    pub manifest: String,
    /// Layers, lowest first.
    pub layers: Vec<Layer>,
}

/// Whether `dir` is an OCI image layout.
pub(crate) fn is_layout(dir: &Path) -> bool {
    dir.join("oci-layout").is_file()
}

/// Reads the layout at `dir` (canonical): picks the manifest for this machine's platform (or
/// the only one), and lists its layers.
pub(crate) fn read(dir: &Path, name: &str) -> Result<OciImage, ImageError> {
    let bad = |reason: String| ImageError::Bad {
        name: name.into(),
        reason,
    };
    let layout: Layout = json(&dir.join("oci-layout"), name)?;
    if !layout.image_layout_version.starts_with("1.") {
        return Err(bad(format!(
            "unsupported imageLayoutVersion {:?}",
            layout.image_layout_version
        )));
    }
    let mut index: Index = json(&dir.join("index.json"), name)?;
    for _ in 0..MAX_INDEX_DEPTH {
        let chosen = choose(index.manifests).map_err(&bad)?;
        let (hex, blob_path) = blob(dir, &chosen.digest, name)?;
        let bytes = std::fs::read(&blob_path)?;
        if digest::sha256_reader(&bytes[..])? != hex {
            return Err(bad(format!(
                "blob {} does not match its digest",
                chosen.digest
            )));
        }
        if chosen.media_type.ends_with("image.index.v1+json")
            || chosen.media_type.ends_with("manifest.list.v2+json")
        {
            index = serde_json::from_slice(&bytes)
                .map_err(|e| bad(format!("index {}: {e}", chosen.digest)))?;
            continue;
        }
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("manifest {}: {e}", chosen.digest)))?;
        let layers = manifest
            .layers
            .iter()
            .map(|d| {
                let gzip = layer_gzip(&d.media_type).map_err(&bad)?;
                let (sha256, path) = blob(dir, &d.digest, name)?;
                Ok(Layer { path, sha256, gzip })
            })
            .collect::<Result<Vec<_>, ImageError>>()?;
        return Ok(OciImage {
            manifest: hex,
            layers,
        });
    }
    Err(bad("indexes nested too deep".into()))
}

/// Checks each layer's digest and applies the layers in order onto `dest`.
pub(crate) fn unpack(image: &OciImage, dest: &Path, name: &str) -> Result<(), ImageError> {
    for layer in &image.layers {
        if digest::sha256_file(&layer.path)? != layer.sha256 {
            return Err(ImageError::Bad {
                name: name.into(),
                reason: format!("layer sha256:{} does not match its digest", layer.sha256),
            });
        }
        let file = std::fs::File::open(&layer.path)?;
        if layer.gzip {
            archive::apply(flate2::read::MultiGzDecoder::new(file), dest, name)?;
        } else {
            archive::apply(std::io::BufReader::new(file), dest, name)?;
        }
    }
    Ok(())
}

/// Whether a layer of `media_type` is gzip-compressed; an error for what cannot be applied.
fn layer_gzip(media_type: &str) -> Result<bool, String> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar" => Ok(false),
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip" => Ok(true),
        other => Err(format!(
            "layer media type {other:?} is not supported (tar or tar+gzip)"
        )),
    }
}

/// The manifest for this machine (linux and its architecture), else the only one.
fn choose(manifests: Vec<Descriptor>) -> Result<Descriptor, String> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let count = manifests.len();
    let mut only = None;
    for m in manifests {
        if m.platform
            .as_ref()
            .is_some_and(|p| p.os == "linux" && p.architecture == arch)
        {
            return Ok(m);
        }
        only = Some(m);
    }
    match (count, only) {
        (1, Some(m)) => Ok(m),
        (0, _) => Err("index.json lists no manifest".into()),
        _ => Err(format!(
            "index.json lists {count} manifests and none for linux/{arch}"
        )),
    }
}

/// The blob of `digest` (`sha256:HEX`) in the layout at `dir`: its hex and path.
fn blob(dir: &Path, digest_text: &str, name: &str) -> Result<(String, PathBuf), ImageError> {
    let bad = |reason: String| ImageError::Bad {
        name: name.into(),
        reason,
    };
    let hex = digest_text
        .strip_prefix("sha256:")
        .filter(|h| digest::is_sha256_hex(h))
        .ok_or_else(|| bad(format!("digest {digest_text:?} is not sha256:HEX")))?;
    let path = dir.join("blobs/sha256").join(hex);
    let canonical =
        std::fs::canonicalize(&path).map_err(|e| bad(format!("blob {digest_text}: {e}")))?;
    if !canonical.starts_with(dir) {
        return Err(bad(format!("blob {digest_text} is outside the image")));
    }
    Ok((hex.to_string(), canonical))
}

/// A JSON file of the layout.
fn json<T: serde::de::DeserializeOwned>(path: &Path, name: &str) -> Result<T, ImageError> {
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    let bytes = std::fs::read(path).map_err(|e| ImageError::Bad {
        name: name.into(),
        reason: format!("{file}: {e}"),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ImageError::Bad {
        name: name.into(),
        reason: format!("{file}: {e}"),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::archive::tests::{tar_of, E};
    use super::*;
    use std::io::Write;

    /// Writes `bytes` as a blob of the layout at `dir`; returns `sha256:HEX`.
    fn put_blob(dir: &Path, bytes: &[u8]) -> String {
        let hex = digest::sha256_reader(bytes).unwrap();
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join("blobs/sha256").join(&hex), bytes).unwrap();
        format!("sha256:{hex}")
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    /// Builds an OCI layout at `dir` of two layers (the first gzip): `etc/os` then a whiteout
    /// of `etc/old` and a new `etc/os`.
    pub(crate) fn make_layout(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        let l1 = put_blob(
            dir,
            &gzip(&tar_of(&[
                E::Dir("etc"),
                E::File("etc/os", b"one"),
                E::File("etc/old", b"old"),
                E::Dir("mnt"),
            ])),
        );
        let l2 = put_blob(
            dir,
            &tar_of(&[E::File("etc/os", b"two"), E::File("etc/.wh.old", b"")]),
        );
        let config = put_blob(dir, b"{}");
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config}","size":2}},
            "layers":[
              {{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{l1}","size":1}},
              {{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{l2}","size":1}}]}}"#
        );
        let m = put_blob(dir, manifest.as_bytes());
        let index = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{m}","size":1}}]}}"#
        );
        std::fs::write(dir.join("index.json"), index).unwrap();
    }

    #[test]
    fn a_layout_unpacks_its_layers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("img");
        make_layout(&layout);
        let layout = std::fs::canonicalize(layout).unwrap();
        assert!(is_layout(&layout));
        let image = read(&layout, "img").unwrap();
        assert_eq!(image.layers.len(), 2);
        assert!(image.layers[0].gzip && !image.layers[1].gzip);
        let dest = dir.path().join("out");
        std::fs::create_dir(&dest).unwrap();
        unpack(&image, &dest, "img").unwrap();
        assert_eq!(std::fs::read(dest.join("etc/os")).unwrap(), b"two");
        assert!(!dest.join("etc/old").exists());
    }

    #[test]
    fn broken_layouts_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("img");
        make_layout(&layout);
        let layout = std::fs::canonicalize(layout).unwrap();
        // A layer changed after the manifest was written.
        let image = read(&layout, "img").unwrap();
        std::fs::write(&image.layers[1].path, b"tampered").unwrap();
        let dest = dir.path().join("out");
        std::fs::create_dir(&dest).unwrap();
        let e = unpack(&image, &dest, "img").unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        // A digest that is not sha256:HEX (no path tricks through it).
        std::fs::write(
            layout.join("index.json"),
            br#"{"manifests":[{"mediaType":"x","digest":"sha256:../../etc/passwd"}]}"#,
        )
        .unwrap();
        let e = read(&layout, "img").unwrap_err();
        assert!(e.to_string().contains("sha256:HEX"), "{e}");
        std::fs::write(layout.join("index.json"), b"{").unwrap();
        let e = read(&layout, "img").unwrap_err();
        assert!(e.to_string().contains("index.json"), "{e}");
        assert!(layer_gzip("application/vnd.oci.image.layer.v1.tar+zstd").is_err());
    }
}
