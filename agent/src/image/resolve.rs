//! Where an image name points: inside the image root after resolving symbolic links, or an
//! error that says why not.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::ImageError;

/// Resolves `name` (relative to `root`, or absolute inside it) to a canonical path inside the
/// canonical `root`. A name that resolves outside (through `..` or a symbolic link) is
/// [`ImageError::Outside`]; one that names nothing is [`ImageError::NotFound`].
pub(crate) fn resolve(root: &Path, name: &str) -> Result<PathBuf, ImageError> {
    if name.is_empty() || name.contains('\0') {
        return Err(ImageError::Bad {
            name: name.into(),
            reason: "an image name is a non-empty path without NUL".into(),
        });
    }
    let path = Path::new(name);
    let joined = if path.is_absolute() {
        if !path.starts_with(root) {
            return Err(ImageError::Outside(name.into()));
        }
        path.to_path_buf()
    } else {
        root.join(path)
    };
    let canonical = match std::fs::canonicalize(&joined) {
        Ok(p) => p,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(ImageError::NotFound(name.into()));
        }
        Err(e) => return Err(ImageError::Io(e)),
    };
    if !canonical.starts_with(root) {
        return Err(ImageError::Outside(name.into()));
    }
    if canonical == root {
        return Err(ImageError::Bad {
            name: name.into(),
            reason: "names the image root itself, not an image in it".into(),
        });
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("images");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("a.tar"), b"x").unwrap();
        std::fs::write(root.join("sub/b.tar"), b"x").unwrap();
        std::fs::write(dir.path().join("secret.tar"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.tar"), root.join("escape.tar")).unwrap();
        std::os::unix::fs::symlink("sub/b.tar", root.join("inner.tar")).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        (dir, root)
    }

    #[test]
    fn names_inside_the_root_resolve() {
        let (_dir, root) = setup();
        assert_eq!(resolve(&root, "a.tar").unwrap(), root.join("a.tar"));
        assert_eq!(
            resolve(&root, "./sub/b.tar").unwrap(),
            root.join("sub/b.tar")
        );
        let absolute = root.join("sub/b.tar");
        assert_eq!(
            resolve(&root, absolute.to_str().unwrap()).unwrap(),
            absolute
        );
        // A symbolic link that stays inside resolves to its target.
        assert_eq!(resolve(&root, "inner.tar").unwrap(), root.join("sub/b.tar"));
    }

    #[test]
    fn names_outside_the_root_are_refused() {
        let (dir, root) = setup();
        let outside = dir.path().join("secret.tar");
        assert!(matches!(
            resolve(&root, outside.to_str().unwrap()),
            Err(ImageError::Outside(_))
        ));
        assert!(matches!(
            resolve(&root, "/etc/passwd"),
            Err(ImageError::Outside(_))
        ));
        assert!(matches!(
            resolve(&root, "../secret.tar"),
            Err(ImageError::Outside(_))
        ));
        // A symbolic link in the root pointing out is refused after resolving.
        let e = resolve(&root, "escape.tar").unwrap_err();
        assert!(matches!(e, ImageError::Outside(_)), "{e}");
        assert!(e.to_string().contains("outside"), "{e}");
    }

    #[test]
    fn missing_and_malformed_names_say_so() {
        let (_dir, root) = setup();
        let e = resolve(&root, "nope.tar").unwrap_err();
        assert!(matches!(e, ImageError::NotFound(_)), "{e}");
        assert!(e.to_string().contains("not found"), "{e}");
        assert!(matches!(resolve(&root, ""), Err(ImageError::Bad { .. })));
        assert!(matches!(resolve(&root, "."), Err(ImageError::Bad { .. })));
    }
}
