//! Handing the pages a load freed back to the system.

/// Returns the heap's free pages to the system. A load frees most of what it allocated (the
/// parse's per-thread buffers, the builder's staging arrays), but glibc keeps those pages in
/// each thread's arena, where they count as the process's memory until a later allocation
/// happens to reuse them. Called once per load the caller asked for (not per rank of a parallel
/// load). Elsewhere a no-op.
pub(crate) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer and only gives free memory back to the kernel.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
