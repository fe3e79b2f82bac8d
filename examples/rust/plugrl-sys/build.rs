//! Finds libplugrl, tells cargo how to link it, and generates the bindings
//! of its header with bindgen.
//!
//! The library, in this order:
//!   1. pkg-config's `plugrl.pc` (searched on `PKG_CONFIG_PATH`; in a source
//!      tree, `build/lib/pkgconfig` after `./build.sh`). Set
//!      `PLUGRL_NO_PKG_CONFIG=1` to skip it (the pkg-config crate reads that).
//!   2. `PLUGRL_LIB_DIR`: a directory holding `libplugrl.so`.
//!
//! The header `plugrl.h`, in this order:
//!   1. the include directory pkg-config gave with the library, so that the
//!      bindings match the library that is linked;
//!   2. `PLUGRL_INCLUDE_DIR`;
//!   3. the repository's `include/` when this crate is built in the source
//!      tree of libplugrl (`examples/rust/plugrl-sys`).

use std::env;
use std::path::{Path, PathBuf};

const LIB_DIR_VAR: &str = "PLUGRL_LIB_DIR";
const INCLUDE_DIR_VAR: &str = "PLUGRL_INCLUDE_DIR";
const HEADER: &str = "plugrl.h";

/// Where the library was found.
struct Found {
    /// The directory of libplugrl, when known (pkg-config may not say for a
    /// system directory).
    lib_dir: Option<PathBuf>,
    /// Include directories that came with the library (pkg-config only).
    include_dirs: Vec<PathBuf>,
}

fn main() {
    println!("cargo:rerun-if-env-changed={LIB_DIR_VAR}");
    println!("cargo:rerun-if-env-changed={INCLUDE_DIR_VAR}");
    // The pkg-config crate emits rerun-if-env-changed for PKG_CONFIG_PATH
    // and the other variables it reads.

    let found = find_library();
    let header = find_header(&found);
    println!("cargo:rerun-if-changed={}", header.display());

    // Metadata for crates that depend on this one (links = "plugrl"): they
    // see DEP_PLUGRL_INCLUDE and DEP_PLUGRL_LIB_DIR, e.g. to build C code
    // against the same header.
    if let Some(dir) = header.parent() {
        println!("cargo:include={}", dir.display());
    }
    if let Some(dir) = &found.lib_dir {
        println!("cargo:lib_dir={}", dir.display());
    }

    generate(&header);
}

/// Finds libplugrl and prints the link directives, or stops the build with
/// a message that names both ways to point at it.
fn find_library() -> Found {
    // probe() prints cargo:rustc-link-search and cargo:rustc-link-lib itself.
    let pkg_error = match pkg_config::Config::new()
        .atleast_version("0.2.0")
        .probe("plugrl")
    {
        Ok(lib) => {
            return Found {
                lib_dir: lib.link_paths.first().cloned(),
                include_dirs: lib.include_paths,
            }
        }
        Err(e) => e.to_string(),
    };

    let lib_dir = match env::var_os(LIB_DIR_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => fail(&format!(
            "pkg-config did not find plugrl:\n{}\nand {LIB_DIR_VAR} is not set.",
            indent(&pkg_error)
        )),
    };
    if !has_library(&lib_dir) {
        fail(&format!(
            "pkg-config did not find plugrl:\n{}\nand {LIB_DIR_VAR}={} holds no libplugrl.so.",
            indent(&pkg_error),
            lib_dir.display()
        ));
    }
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=plugrl");
    Found {
        lib_dir: Some(lib_dir),
        include_dirs: Vec::new(),
    }
}

fn has_library(dir: &Path) -> bool {
    ["libplugrl.so", "libplugrl.dylib"]
        .iter()
        .any(|name| dir.join(name).is_file())
}

/// The header to generate the bindings from (see the top of this file).
fn find_header(found: &Found) -> PathBuf {
    if let Some(h) = found
        .include_dirs
        .iter()
        .map(|d| d.join(HEADER))
        .find(|h| h.is_file())
    {
        return h;
    }
    if let Some(dir) = env::var_os(INCLUDE_DIR_VAR) {
        let h = PathBuf::from(dir).join(HEADER);
        if !h.is_file() {
            fail(&format!(
                "{INCLUDE_DIR_VAR} is set, but {} does not exist.",
                h.display()
            ));
        }
        return h;
    }
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let in_tree = manifest_dir.join("../../../include").join(HEADER);
    if in_tree.is_file() {
        return in_tree;
    }
    fail(&format!(
        "libplugrl was found, but not its header {HEADER}: pkg-config gave no include \
         directory holding it, {INCLUDE_DIR_VAR} is not set, and this is not a libplugrl \
         source tree. Set {INCLUDE_DIR_VAR} to the directory holding {HEADER}."
    ))
}

fn generate(header: &Path) {
    let include_dir = header.parent().expect("a file has a parent directory");
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        // Code for the oldest Rust this crate supports, not bindgen's
        // newest (which would, e.g., need `unsafe extern` blocks).
        .rust_target(rust_target())
        .clang_arg(format!("-I{}", include_dir.display()))
        // The header's comments are plain /* */ comments, not doc comments:
        // this makes clang attach them to the declarations, so the
        // generated items carry the contract in their rustdoc.
        .clang_arg("-fparse-all-comments")
        // Only the library's names, not what <stdint.h> declares.
        .allowlist_function("plugrl_.*")
        .allowlist_type("plugrl_.*")
        .allowlist_var("PLUGRL_.*")
        // Enums as newtypes over the C integer (plugrl_status(0),
        // plugrl_status::PLUGRL_OK), not `rustified_enum`: a plugrl_status
        // or plugrl_dtype comes back FROM the library, and a newer library
        // may return a value this header does not list. In a Rust enum such
        // a value is undefined behaviour; in a newtype it is just another
        // integer, which the safe crate maps to an "unknown" case. The
        // newtype (unlike constified modules) still keeps the two apart, so
        // a dtype cannot be passed where a status goes.
        .newtype_enum("plugrl_status|plugrl_dtype")
        // #defines as i32 (c int): PLUGRL_LOG_* are compared with the log
        // callback's `int level`, PLUGRL_MAX_DIMS with `int32_t ndim`.
        .default_macro_constant_type(bindgen::MacroTypeVariation::Signed)
        // Default gives zeroed option/observation structs; callers still
        // start plugrl_options with plugrl_options_init_size (it sets `size`).
        .derive_default(true)
        // core:: paths, so that the crate is no_std like the C it wraps.
        .use_core()
        .derive_debug(true)
        .derive_copy(true)
        // plugrl_client and plugrl_runner are declared but never defined in
        // the header, so bindgen emits them as zero-sized opaque structs that
        // are only ever used behind pointers.
        .layout_tests(true)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .parse_callbacks(Box::new(PlainComments))
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen failed on {}: {e}", header.display())));

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it")).join("bindings.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", out.display())));
}

/// The header's comments are plain text, not Markdown: `shape[0]` is not
/// a link and `<U` not an HTML tag. Escaping them keeps rustdoc from
/// reading them so (and from warning about every one).
#[derive(Debug)]
struct PlainComments;

impl bindgen::callbacks::ParseCallbacks for PlainComments {
    fn process_comment(&self, comment: &str) -> Option<String> {
        let mut out = String::with_capacity(comment.len() + 16);
        for c in comment.chars() {
            if matches!(c, '[' | ']' | '<' | '>' | '*' | '_' | '`') {
                out.push('\\');
            }
            out.push(c);
        }
        Some(out)
    }
}

/// The package's rust-version (1.MINOR) as a bindgen target.
fn rust_target() -> bindgen::RustTarget {
    let v = env::var("CARGO_PKG_RUST_VERSION").unwrap_or_default();
    let minor = v
        .strip_prefix("1.")
        .and_then(|m| m.split('.').next())
        .and_then(|m| m.parse().ok());
    match minor.map(|m| bindgen::RustTarget::stable(m, 0)) {
        Some(Ok(t)) => t,
        _ => bindgen::LATEST_STABLE_RUST,
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Stops the build with what went wrong and the two ways to fix it. The
/// message goes to stderr, which cargo shows under "--- stderr" when a
/// build script fails (a panic would add a backtrace to it).
fn fail(what: &str) -> ! {
    eprintln!(
        "\nplugrl-sys: cannot build against libplugrl.\n{what}\n\n\
         Point the build at libplugrl in one of two ways:\n  \
         - PKG_CONFIG_PATH=<dir holding plugrl.pc>, e.g. <libplugrl>/build/lib/pkgconfig\n    \
         after ./build.sh, or <prefix>/lib/pkgconfig after ./build.sh install <prefix>;\n  \
         - {LIB_DIR_VAR}=<dir holding libplugrl.so> (and {INCLUDE_DIR_VAR}=<dir holding {HEADER}>\n    \
         outside the libplugrl source tree).\n\
         At run time the dynamic loader must find libplugrl.so too (LD_LIBRARY_PATH, or an\n\
         installed library).\n"
    );
    std::process::exit(1);
}
