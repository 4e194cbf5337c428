// Package regular opens input files only when they are regular files (or symlinks to one), and
// reads them in chunks a context cancels. A named pipe, a device or a socket given where a
// model, tokenizer or adapter file belongs would otherwise block the reader forever (opening a
// FIFO waits for a writer) or stream without end (/dev/zero); a directory would fail later with
// an error that does not say what is wrong.
package regular

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is matched by the error for a path that exists but is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// chunk is how much ReadFile reads between two looks at its context.
const chunk = 1 << 20

// NotRegularError names the file and what it is instead.
type NotRegularError struct {
	Path string
	Kind string // "a directory", "a named pipe", …
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Kind)
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// Open opens name for reading if it is a regular file. The open itself does not block: it is
// made non-blocking, which for a FIFO returns at once instead of waiting for a writer, and
// the file's type is checked on the open descriptor (no window between a check and the open).
func Open(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: name, Kind: kind(fi.Mode())}
	}
	return f, nil
}

// Check reports an error when name exists but is not a regular file (a symlink is followed),
// and the os.Stat error when it does not exist.
func Check(name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &NotRegularError{Path: name, Kind: kind(fi.Mode())}
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file (" + m.Type().String() + ")"
}

// TooLargeError is ReadFile's error for a file over its limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Path, e.Limit)
}

// ReadFile reads the regular file name whole, refusing one over limit bytes before reading it
// (TooLargeError), and stops with ctx's error when ctx is cancelled between two chunks.
func ReadFile(ctx context.Context, name string, limit int64) ([]byte, error) {
	f, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: name, Limit: limit}
	}
	// The size is a hint: the file may grow while it is read, so the limit still bounds it.
	buf := make([]byte, 0, fi.Size()+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):min(cap(buf), len(buf)+chunk)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &TooLargeError{Path: name, Limit: limit}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
}
