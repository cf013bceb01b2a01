//! A memory-mapped input that another process truncates or rewrites while it is read raises
//! SIGBUS at the next access to a page that is gone, which would end the process with no
//! message. This handler turns it into the one-line error and exit status 2 that every other
//! bad input gets. (Files written in the last few seconds are read, not mapped; `--no-mmap`
//! reads every file.)

#![allow(unsafe_code)]

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The message the handler writes: made before any mapping exists, as a handler may not
/// allocate.
static MESSAGE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static MESSAGE_LEN: AtomicUsize = AtomicUsize::new(0);

/// Every input named so far (both sides of a `check` or `diff` load at once).
static INPUTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Installs the handler, its message naming `inputs` and those of earlier calls.
pub(crate) fn install(inputs: &[PathBuf]) {
    let names = {
        let mut all = INPUTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        all.extend(inputs.iter().map(|p| p.display().to_string()));
        all.join(", ")
    };
    let text = format!(
        "steplens: error: {names}: the file changed while it was read (truncated or rewritten under its memory mapping); copy it first, or pass --no-mmap\n"
    );
    // Leaked on purpose: the handler may run at any time until the process ends.
    let bytes: &'static mut [u8] = Box::leak(text.into_bytes().into_boxed_slice());
    MESSAGE_LEN.store(bytes.len(), Ordering::SeqCst);
    MESSAGE.store(bytes.as_mut_ptr(), Ordering::SeqCst);
    // SAFETY: `sigaction` with a zeroed struct, an empty mask and a handler that only calls
    // the async-signal-safe `write` and `_exit`.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&raw mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &raw const action, std::ptr::null_mut());
    }
}

extern "C" fn on_sigbus(_signal: libc::c_int) {
    let text = MESSAGE.load(Ordering::SeqCst);
    let len = MESSAGE_LEN.load(Ordering::SeqCst);
    // SAFETY: `text` is null or the leaked message of `len` bytes; `write` and `_exit` are
    // async-signal-safe.
    unsafe {
        if !text.is_null() {
            libc::write(2, text.cast::<libc::c_void>(), len);
        }
        libc::_exit(2);
    }
}
