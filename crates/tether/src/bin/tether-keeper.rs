//! The standalone keeper program. Programs embedding the tether library find
//! it beside themselves or on `PATH` (or set `TETHER_KEEPER`); the `tether`
//! CLI is its own keeper and does not need it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static ALLOCATOR: Recycling = Recycling::new();

fn main() {
    tether::keeper::main();
}

/// The C library's allocator, with the small blocks a keeper frees kept
/// for its next request instead of handed back.
///
/// The Python wheel's keeper is a static musl program (it starts in ~0.1
/// ms). musl's allocator gives a group of small blocks back to the kernel
/// (`munmap`) the moment its last block is freed, and maps a new one at the
/// next allocation: every spawn request — its argv and environment decoded,
/// copied into C strings, the pointer arrays built, all freed once the
/// command started — cost three `mmap`s and three `munmap`s (each a TLB
/// shootdown on a VM), ~50 µs of the keeper's ~150 µs per warm spawn here
/// (`perf record` of the keeper). Recycled, a warm keeper's requests map
/// nothing.
///
/// Blocks up to 4 KiB are kept by power-of-two class, at most
/// [`CLASS_BUDGET`] bytes per class (~150 KiB in all at worst); larger
/// ones, and what does not fit, go back to the C library. The keeper is
/// single-threaded; the lock only keeps this sound if that ever changes.
struct Recycling {
    locked: AtomicBool,
    free: UnsafeCell<[FreeList; CLASSES]>,
}

/// Classes 16, 32, …, 4096 bytes.
const CLASSES: usize = 9;
const SMALLEST: usize = 16;
/// At most this many bytes of freed blocks kept per class.
const CLASS_BUDGET: usize = 16 << 10;

#[derive(Clone, Copy)]
struct FreeList {
    /// The first free block; each holds the next one's address in its first
    /// bytes.
    head: *mut u8,
    len: usize,
}

// SAFETY: `free` is only touched with `locked` held.
unsafe impl Sync for Recycling {}

impl Recycling {
    const fn new() -> Recycling {
        Recycling {
            locked: AtomicBool::new(false),
            free: UnsafeCell::new(
                [FreeList {
                    head: std::ptr::null_mut(),
                    len: 0,
                }; CLASSES],
            ),
        }
    }

    /// Runs `f` on the free lists with the lock held.
    fn with<T>(&self, f: impl FnOnce(&mut [FreeList; CLASSES]) -> T) -> T {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held: no other reference to the lists exists.
        let out = f(unsafe { &mut *self.free.get() });
        self.locked.store(false, Ordering::Release);
        out
    }
}

/// The class of a block of `layout`, if it is small enough to keep.
fn class(layout: Layout) -> Option<usize> {
    if layout.align() > SMALLEST {
        return None;
    }
    let size = layout.size().max(SMALLEST).next_power_of_two();
    let class = (size.trailing_zeros() - SMALLEST.trailing_zeros()) as usize;
    (class < CLASSES).then_some(class)
}

/// The layout a block of `class` is allocated with.
fn class_layout(class: usize) -> Layout {
    // SAFETY: a power of two no smaller than its alignment, far below
    // isize::MAX.
    unsafe { Layout::from_size_align_unchecked(SMALLEST << class, SMALLEST) }
}

// SAFETY: every block comes from `System`; a kept block is handed out again
// only for a layout of its class, which it is large and aligned enough for.
unsafe impl GlobalAlloc for Recycling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class(layout) else {
            // SAFETY: as the caller's.
            return unsafe { System.alloc(layout) };
        };
        let kept = self.with(|free| {
            let list = &mut free[class];
            let block = list.head;
            if !block.is_null() {
                // SAFETY: a kept block holds the next one's address.
                list.head = unsafe { block.cast::<*mut u8>().read() };
                list.len -= 1;
            }
            block
        });
        if kept.is_null() {
            // SAFETY: a valid, non-zero-sized layout.
            unsafe { System.alloc(class_layout(class)) }
        } else {
            kept
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class(layout) else {
            // SAFETY: allocated by `System` with this layout.
            return unsafe { System.dealloc(block, layout) };
        };
        let kept = self.with(|free| {
            let list = &mut free[class];
            if (list.len + 1) * (SMALLEST << class) > CLASS_BUDGET {
                return false;
            }
            // SAFETY: the block is ours again and at least 16 bytes.
            unsafe { block.cast::<*mut u8>().write(list.head) };
            list.head = block;
            list.len += 1;
            true
        });
        if !kept {
            // SAFETY: allocated by `System` with its class's layout.
            unsafe { System.dealloc(block, class_layout(class)) }
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` and `new_size`.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new)) {
            // Still fits the block it has.
            (Some(old), Some(class)) if old == class => block,
            // Neither is ours: the C library may grow it in place.
            // SAFETY: as the caller's.
            (None, None) => unsafe { System.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: `new` is valid; both blocks are live for the copy.
                unsafe {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_small_block_is_handed_out_again_for_its_class() {
        let a = Recycling::new();
        let layout = Layout::from_size_align(40, 8).unwrap();
        // SAFETY (whole test): layouts are valid and non-zero-sized; each
        // block is written within its size and freed once, with the layout
        // it was allocated (or last reallocated) with.
        unsafe {
            let block = a.alloc(layout);
            assert!(!block.is_null());
            block.write_bytes(0xa5, 40);
            a.dealloc(block, layout);
            // 33..=64 bytes share the class: the same block comes back.
            let again = a.alloc(Layout::from_size_align(64, 16).unwrap());
            assert_eq!(again, block);
            // Growing within the class keeps the block and its bytes.
            let grown = a.realloc(again, Layout::from_size_align(64, 16).unwrap(), 50);
            assert_eq!(grown, block);
            // Growing past it moves the bytes to a block of the new class.
            grown.write_bytes(7, 50);
            let moved = a.realloc(grown, Layout::from_size_align(50, 16).unwrap(), 3000);
            assert_ne!(moved, block);
            assert!(
                std::slice::from_raw_parts(moved, 50)
                    .iter()
                    .all(|&b| b == 7)
            );
            a.dealloc(moved, Layout::from_size_align(3000, 16).unwrap());
            // The 64-byte block went back to its list when it moved.
            assert_eq!(a.alloc(Layout::from_size_align(60, 4).unwrap()), block);
            a.dealloc(block, Layout::from_size_align(60, 4).unwrap());
        }
    }

    #[test]
    fn what_is_kept_stays_within_the_budget_and_large_blocks_are_not_kept() {
        let a = Recycling::new();
        let layout = Layout::from_size_align(4096, 8).unwrap();
        let n = CLASS_BUDGET / 4096 + 3;
        // SAFETY: valid layouts; each block freed once with its layout.
        unsafe {
            let blocks: Vec<*mut u8> = (0..n).map(|_| a.alloc(layout)).collect();
            for &block in &blocks {
                a.dealloc(block, layout);
            }
            let kept = a.with(|free| free[CLASSES - 1].len);
            assert_eq!(kept, CLASS_BUDGET / 4096);
            assert!(class(Layout::from_size_align(4097, 8).unwrap()).is_none());
            assert!(class(Layout::from_size_align(64, 64).unwrap()).is_none());
            let large = Layout::from_size_align(1 << 20, 8).unwrap();
            let block = a.alloc(large);
            assert!(!block.is_null());
            a.dealloc(block, large);
            assert_eq!(
                a.with(|free| free.iter().map(|l| l.len).sum::<usize>()),
                kept
            );
            // Hand the kept blocks back so the test leaves nothing behind.
            for _ in 0..kept {
                System.dealloc(a.alloc(layout), class_layout(CLASSES - 1));
            }
        }
    }
}
