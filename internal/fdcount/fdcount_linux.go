package fdcount

import "syscall"

// Open returns how many file descriptors the process holds (the one Open
// uses for the listing not counted), or false when it cannot tell.
func Open() (int, bool) {
	fd, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer syscall.Close(fd)
	var buf [16 << 10]byte
	n := 0
	for {
		k, err := syscall.ReadDirent(fd, buf[:])
		if err != nil {
			return 0, false
		}
		if k <= 0 {
			break
		}
		n += entries(buf[:k])
	}
	// "." and "..", and the descriptor of the listing itself.
	return max(n-3, 0), true
}

// entries counts the linux_dirent64 records of b: each starts with an
// 8-byte inode, an 8-byte offset and its 2-byte length.
func entries(b []byte) int {
	n := 0
	for len(b) >= 19 {
		reclen := int(b[16]) | int(b[17])<<8
		if reclen == 0 || reclen > len(b) {
			break
		}
		n++
		b = b[reclen:]
	}
	return n
}
