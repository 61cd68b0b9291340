package prefault

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestFindMapping(t *testing.T) {
	maps := []byte("00400000-0137e000 r-xp 00000000 fe:00 9977931    /usr/bin/leaderrun\n" +
		"3853bc00000-3853c000000 rw-p 00000000 00:00 0 \n" +
		"7ffe3a469000-7ffe3a48a000 rw-p 00000000 00:00 0                          [stack]")
	for _, tc := range []struct {
		addr   uintptr
		lo, hi uintptr
		ok     bool
	}{
		{0x400000, 0x400000, 0x137e000, true},
		{0x3853bebc940, 0x3853bc00000, 0x3853c000000, true},
		{0x7ffe3a489fff, 0x7ffe3a469000, 0x7ffe3a48a000, true}, // the last line has no newline
		{0x3853c000000, 0, 0, false},                           // a range's end is not in it
		{0x100, 0, 0, false},
	} {
		lo, hi, ok := findMapping(maps, tc.addr)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("findMapping(%#x) = %#x, %#x, %v; want %#x, %#x, %v", tc.addr, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
	if _, _, ok := findMapping([]byte("garbage\n"), 0x400000); ok {
		t.Error("findMapping found a range in a line that is not one")
	}
}

// TestPopulateMakesTheRestOfTheMappingResident maps fresh anonymous memory
// (none of it resident), and checks that what the initialiser does to the
// heap's mapping makes every page from an address's page to the end
// resident, and none before it.
func TestPopulateMakesTheRestOfTheMappingResident(t *testing.T) {
	const pages = 64
	page := unix.Getpagesize()
	// A page without access on either side keeps the kernel from merging
	// the mapping with a neighbour of the same kind.
	all, err := unix.Mmap(-1, 0, (pages+2)*page, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(all)
	mem := all[page : (pages+1)*page]
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	if n := resident(t, mem); n != 0 {
		t.Fatalf("%d of %d fresh pages are resident before populate", n, pages)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	addr := base + 10*uintptr(page) + 100 // inside the 11th page
	start, end, ok := mappingOf(addr)
	if !ok {
		t.Fatalf("mappingOf(%#x): no mapping found in /proc/self/maps", addr)
	}
	if want := base + 10*uintptr(page); start != want || end != base+pages*uintptr(page) {
		t.Fatalf("mappingOf(%#x) = %#x-%#x, want %#x-%#x", addr, start, end, want, base+pages*uintptr(page))
	}
	populate(start, end)
	if n := resident(t, mem[:10*page]); n != 0 {
		t.Errorf("%d pages before the address's page are resident, want none", n)
	}
	if n := resident(t, mem[10*page:]); n != pages-10 {
		t.Errorf("%d of the %d pages from the address's page on are resident, want all", n, pages-10)
	}
	for i := range mem {
		if mem[i] != 0 {
			t.Fatalf("byte %d is %d after populate, want 0", i, mem[i])
		}
	}
}

func resident(t *testing.T, mem []byte) int {
	t.Helper()
	vec := make([]byte, (len(mem)+unix.Getpagesize()-1)/unix.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
