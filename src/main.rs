//! The `ebb` command: everything but the allocator lives in the library ([`ebb::cli`]).

use std::process::ExitCode;

/// jemalloc, not glibc's allocator: `ebb serve` on a large fleet allocates most of a tick's
/// memory afresh at every tick from several threads, and glibc's per-thread arenas kept about
/// half as much again as the peak heap resident. jemalloc kept the least of the three tried
/// (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts: freed pages go back to the system at once. By
/// default it keeps them for 10 s, and each tick's data then piled onto the last one's:
/// `ebb serve` on 100k instances peaked at 196 MB resident instead of 173 MB, with the same
/// tick times (BENCHMARKS.md). `_RJEM_MALLOC_CONF` in the environment still overrides it.
#[export_name = "_rjem_malloc_conf"]
static ALLOCATOR_SETTINGS: AllocatorSettings =
    AllocatorSettings(c"dirty_decay_ms:0,muzzy_decay_ms:0".as_ptr());

/// A C string for jemalloc (`const char *`).
#[repr(transparent)]
struct AllocatorSettings(*const std::ffi::c_char);

// SAFETY: it points to a string literal, which lives as long as the program and never changes.
unsafe impl Sync for AllocatorSettings {}

#[tokio::main]
async fn main() -> ExitCode {
    ebb::cli::main().await
}
