package wire

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// A Go program entering an ordinary system call wakes the runtime's
// monitor thread if it sleeps, so that it could retake the processor
// should the call block. On a channel that wakes each side for every
// message, that is one more thread switch per message on each side, which
// on a virtual machine costs more than the message itself. The channel's
// descriptors are non-blocking, so read(2) and write(2) cannot block: they
// are issued as raw system calls, and the network poller waits when a
// call would block.

// rawFile reads and writes a non-blocking descriptor with raw system calls.
type rawFile struct {
	f  *os.File
	rc syscall.RawConn
}

func newRawFile(f *os.File) *rawFile {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawFile{f: f, rc: rc}
}

func (r *rawFile) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(m), e
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, errno
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawFile) Write(b []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			m, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[written])), uintptr(len(b)-written))
			switch e {
			case 0:
				written += int(m)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err != nil {
		return written, err
	}
	if errno != 0 {
		return written, errno
	}
	return written, nil
}

// raw wraps w for raw system calls when it is a non-blocking file.
func raw(w any) any {
	f, ok := w.(*os.File)
	if !ok {
		return w
	}
	if r := newRawFile(f); r != nil {
		return r
	}
	return w
}
