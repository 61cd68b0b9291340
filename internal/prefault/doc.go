// Package prefault makes the heap that a starting leaderrun is about to
// use resident in one system call, instead of one page fault per page.
//
// Every leaderrun process (each client command such as step-down, and the
// init of each command's PID namespace) runs the initialisers of all its
// packages before main, and they allocate about 2 MB. On a paravirtualized
// guest a page fault costs an order of magnitude more than populating the
// page with madvise(MADV_POPULATE_WRITE) in one call, so the start is
// faster with the next megabyte of the heap populated at the start of the
// initialisers (BENCHMARKS.md measures process starts).
//
// Importing the package is all it takes: its initialiser runs once, early
// (it imports nothing that is initialised late). It populates the heap's
// current mapping from the page of a fresh object on, up to its end or
// maxPopulate: the pages the runtime hands out next, about as many as the
// rest of a start uses (an idle replica's anonymous memory grew by 0.1 to
// 0.3 MB; 2 MB saved another millisecond and cost up to 2 MB). The
// executable's own pages are left to fault in: populating them too saved
// 1.3 ms more but would add the whole binary (over 30 MB) to every
// process's resident set. Where the kernel lacks MADV_POPULATE_WRITE
// (before Linux 5.14), or anywhere else, nothing happens.
package prefault
