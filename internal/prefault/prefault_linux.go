package prefault

import (
	"bytes"
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the range in
// as if written, zero-filled for anonymous memory.
const madvPopulateWrite = 23

// maxPopulate bounds what the initialiser populates: about what the rest
// of a start allocates (see the package doc).
const maxPopulate = 1 << 20

// probe is a fresh heap object: the pages after it are the heap's next.
var probe *[64]byte

func init() {
	probe = new([64]byte)
	start, end, ok := mappingOf(uintptr(unsafe.Pointer(probe)))
	if !ok {
		return
	}
	populate(start, min(end, start+maxPopulate))
}

// mappingOf returns the range from addr's page to the end of the mapping
// that holds addr, as /proc/self/maps lists it.
func mappingOf(addr uintptr) (start, end uintptr, ok bool) {
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	var buf [16 << 10]byte // a starting process has a few dozen mappings
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	_, hi, found := findMapping(buf[:n], addr)
	if !found {
		return 0, 0, false
	}
	return addr &^ uintptr(syscall.Getpagesize()-1), hi, true
}

// findMapping returns the bounds of the line of maps (the text of
// /proc/PID/maps) whose range holds addr.
func findMapping(maps []byte, addr uintptr) (lo, hi uintptr, ok bool) {
	for len(maps) > 0 {
		line := maps
		if i := bytes.IndexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		from, i := parseHex(line)
		if i == 0 || i >= len(line) || line[i] != '-' {
			return 0, 0, false
		}
		to, j := parseHex(line[i+1:])
		if j == 0 {
			return 0, 0, false
		}
		if from <= addr && addr < to {
			return from, to, true
		}
	}
	return 0, 0, false
}

// populate makes [start, end) resident. Errors are ignored: the pages then
// fault in as they would have.
func populate(start, end uintptr) {
	if end <= start {
		return
	}
	syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite)
}

// parseHex reads the hexadecimal number at the start of b and returns it
// and how many bytes it took.
func parseHex(b []byte) (uintptr, int) {
	var v uintptr
	i := 0
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return v, i
		}
	}
	return v, i
}
