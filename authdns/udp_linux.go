//go:build linux && (amd64 || arm64)

package authdns

import (
	"errors"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// udpBufSize is the receive buffer of one datagram (a larger one arrives
// with MSG_TRUNC and is dropped as garbage: no real query is that big).
const udpBufSize = 4096

// mmsghdr is struct mmsghdr of recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// serveUDP reads datagrams in batches with recvmmsg and answers each batch
// with one sendmmsg, through the runtime's poller (the socket stays
// non-blocking). It returns when the socket is closed.
func (w *worker) serveUDP(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		w.srv.log.Error("udp socket", "err", err)
		return
	}
	var (
		in      = make([]byte, batch*udpBufSize)
		out     = make([]byte, batch*(udpBufSize+512))
		reqs    [batch][]byte
		clients [batch]netip.Addr
		resps   [batch][]byte
		names   [batch][unix.SizeofSockaddrInet6]byte
		iovIn   [batch]unix.Iovec
		iovOut  [batch]unix.Iovec
		recv    [batch]mmsghdr
		send    [batch]mmsghdr
	)
	for i := range batch {
		iovIn[i].Base = &in[i*udpBufSize]
		iovIn[i].SetLen(udpBufSize)
		recv[i].hdr.Iov = &iovIn[i]
		recv[i].hdr.SetIovlen(1)
		recv[i].hdr.Name = &names[i][0]
		send[i].hdr.Iov = &iovOut[i]
		send[i].hdr.SetIovlen(1)
	}
	for {
		for i := range batch {
			recv[i].hdr.Namelen = unix.SizeofSockaddrInet6
			recv[i].hdr.Flags = 0
		}
		var n int
		var serr error
		err := rc.Read(func(fd uintptr) bool {
			r, e := mmsg(unix.SYS_RECVMMSG, fd, &recv[0], batch)
			if e == unix.EAGAIN {
				return false
			}
			if e != 0 {
				serr = e
			}
			n = int(r)
			return true
		})
		if err != nil {
			return // closed
		}
		if serr != nil {
			if errors.Is(serr, unix.EBADF) {
				return
			}
			continue // ECONNREFUSED and friends from ICMP: keep serving
		}
		if n > 0 {
			w.st.batches.Add(1)
		}
		for i := range n {
			reqs[i] = nil // a truncated datagram: dropped as garbage
			if recv[i].hdr.Flags&unix.MSG_TRUNC == 0 {
				reqs[i] = in[i*udpBufSize : i*udpBufSize+int(recv[i].n)]
			}
			clients[i] = sockaddrAddr(&names[i])
		}
		w.answerBatch(reqs[:n], clients[:n], out, udpBufSize+512, resps[:n])
		k := 0
		for i, resp := range resps[:n] {
			if resp == nil {
				continue
			}
			iovOut[k].Base = &resp[0]
			iovOut[k].SetLen(len(resp))
			send[k].hdr.Name = &names[i][0]
			send[k].hdr.Namelen = recv[i].hdr.Namelen
			k++
		}
		for sent := 0; sent < k; {
			var m int
			var werr error
			err := rc.Write(func(fd uintptr) bool {
				r, e := mmsg(unix.SYS_SENDMMSG, fd, &send[sent], k-sent)
				if e == unix.EAGAIN {
					return false
				}
				if e != 0 {
					werr = e
				}
				m = int(r)
				return true
			})
			if err != nil {
				return
			}
			if werr != nil {
				sent++ // skip the datagram that failed
				continue
			}
			sent += m
		}
	}
}

// mmsg calls recvmmsg or sendmmsg (trap) on the non-blocking socket fd
// for the n messages from msgs, again when a signal interrupted it.
//
// It is a raw system call, without the runtime's entersyscall and
// exitsyscall: on a non-blocking socket neither call ever blocks (a full
// queue is EAGAIN, and the loop then waits in the poller), and the
// runtime's bookkeeping is not only instructions: the monitor thread
// takes the processor from a goroutine that is more than 20 us in a
// system call (a sendmmsg of a batch on loopback often is) and hands it
// to another thread, which wakes up, finds nothing to do and sleeps
// again: futex, epoll and nanosleep calls and context switches on the
// server's core for every few batches, none of which a C server pays.
// The price is that while a batch is sent no other goroutine runs on
// this thread's processor, for the time of one sendmmsg.
func mmsg(trap uintptr, fd uintptr, msgs *mmsghdr, n int) (int, unix.Errno) {
	for {
		r, _, e := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(msgs)), uintptr(n), 0, 0, 0)
		if e != unix.EINTR {
			return int(r), e
		}
	}
}

// sockaddrAddr reads the address of a struct sockaddr_in or sockaddr_in6.
func sockaddrAddr(b *[unix.SizeofSockaddrInet6]byte) netip.Addr {
	switch *(*uint16)(unsafe.Pointer(&b[0])) {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b[0]))
		return netip.AddrFrom4(sa.Addr)
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&b[0]))
		return netip.AddrFrom16(sa.Addr).Unmap()
	}
	return netip.Addr{}
}
