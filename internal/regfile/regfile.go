// Package regfile reads regular files with a size cap: the one way the
// simulator and the device plugin read the files a user names (scenario,
// quota tree, traces, the mock's fault file).
//
// A path that names a device (/dev/zero), a FIFO, a socket or a folder is
// refused before any byte is read, and a file larger than the caller's cap
// is refused instead of being read to the end, so that a wrong or hostile
// path costs neither unbounded memory nor a blocked goroutine. The file is
// opened with O_NONBLOCK, so a FIFO swapped in between the check and the
// open cannot block either; the opened file is checked again.
//
// It is a leaf package (standard library only): commands, adapters and the
// device plugin may import it; the planning core does no I/O and does not.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file (a folder, a device, a FIFO, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file larger than the cap.
var ErrTooLarge = errors.New("file too large")

// Error is a file refused by Open or Read: Err is ErrNotRegular or
// ErrTooLarge.
type Error struct {
	Path  string
	Mode  fs.FileMode // the file's type, for ErrNotRegular
	Size  int64       // bytes, as far as known, for ErrTooLarge
	Limit int64       // the cap in bytes
	Err   error
}

func (e *Error) Error() string {
	if errors.Is(e.Err, ErrNotRegular) {
		return fmt.Sprintf("%s: not a regular file (%s): want a regular file", e.Path, kind(e.Mode))
	}
	return fmt.Sprintf("%s: larger than %s, the most this kind of file may be (%d bytes or more)",
		e.Path, Size(e.Limit), e.Size)
}

// Unwrap returns ErrNotRegular or ErrTooLarge.
func (e *Error) Unwrap() error { return e.Err }

// kind names a file type for messages.
func kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		return "a folder"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "mode " + m.String()
	}
}

// Size formats a byte count for messages: "64 MiB", "1 KiB", "300 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// Check returns an *Error wrapping ErrNotRegular when path exists and is
// not a regular file (symbolic links are followed), the *fs.PathError of
// os.Stat when it cannot be examined (fs.ErrNotExist when it is absent),
// and nil for a regular file. For config checks of a path read later.
func Check(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &Error{Path: path, Mode: st.Mode(), Err: ErrNotRegular}
	}
	return nil
}

// File is a regular file opened by Open: reads past limit bytes fail with
// an *Error wrapping ErrTooLarge (the file grew after it was opened).
type File struct {
	f     *os.File
	path  string
	limit int64
	read  int64
}

// Open opens the regular file at path for reading at most limit bytes.
// Errors: the *fs.PathError of os.Stat or os.OpenFile (fs.ErrNotExist
// when the file is absent, so a caller can fall back), or an *Error
// wrapping ErrNotRegular or ErrTooLarge. It never blocks on a FIFO.
func Open(path string, limit int64) (*File, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, err
	case !st.Mode().IsRegular():
		f.Close()
		return nil, &Error{Path: path, Mode: st.Mode(), Err: ErrNotRegular}
	case st.Size() > limit:
		f.Close()
		return nil, &Error{Path: path, Size: st.Size(), Limit: limit, Err: ErrTooLarge}
	}
	return &File{f: f, path: path, limit: limit}, nil
}

// Read reads p, failing once more than limit bytes have been read.
func (f *File) Read(p []byte) (int, error) {
	if f.read >= f.limit {
		// One byte past the cap tells a file that grew from one that ends
		// exactly at it.
		var one [1]byte
		n, err := f.f.Read(one[:])
		if n > 0 {
			return 0, &Error{Path: f.path, Size: f.read + int64(n), Limit: f.limit, Err: ErrTooLarge}
		}
		return 0, err
	}
	if rest := f.limit - f.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := f.f.Read(p)
	f.read += int64(n)
	return n, err
}

// Stat returns the opened file's information (a reader that sizes its
// buffer from it, such as snapshot.Decode, reads a large file in one copy).
func (f *File) Stat() (fs.FileInfo, error) { return f.f.Stat() }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Read returns the content of the regular file at path, at most limit
// bytes; errors as Open's.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return b, nil
}
