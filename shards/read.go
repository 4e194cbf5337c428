package shards

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// MaxFooterBytes bounds the Parquet footer OpenParquet decodes. parquet-go holds about 4 KB
// per row group and decodes a footer into about 10 times its size, so a file of very many
// small row groups takes some 40 times its size to open. drmas's
// own files have footers of a few KB; one of 16 MiB is some 100,000 row groups.
const MaxFooterBytes = 16 << 20

// OpenParquet opens a Parquet file of the given size for reading. name is used in errors.
//
// A footer longer than MaxFooterBytes is refused before it is decoded, and every column
// chunk's page headers are checked against the chunk before anything reads a page (a header
// that claims a huge page or string would make parquet-go allocate gigabytes for a small file):
// this reads the file's data once more, a copy of one chunk at a time.
func OpenParquet(r io.ReaderAt, size int64, name string) (*parquet.File, error) {
	if size < 12 {
		return nil, fmt.Errorf("%s: %d bytes is too short to be a parquet file", name, size)
	}
	// parquet-go allocates the footer length the file's last 8 bytes claim (up to 4 GiB)
	// before checking it against the file: check it here, as OpenColumns does.
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil && !(errors.Is(err, io.EOF)) {
		return nil, fmt.Errorf("%s: read parquet footer: %w", name, err)
	}
	flen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if flen > size-12 {
		return nil, fmt.Errorf("%s: footer length %d does not fit a %d-byte parquet file", name, flen, size)
	}
	if flen > MaxFooterBytes {
		return nil, fmt.Errorf("%s: parquet footer of %d MiB, more than the %d MiB read here: the file has too many row groups (decoding its footer takes about 40 times its size in memory); rewrite it with larger row groups (e.g. 100k rows or more each)",
			name, flen>>20, MaxFooterBytes>>20)
	}
	if err := checkFooter(r, size, flen); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f, err := func() (f *parquet.File, err error) {
		defer func() {
			// parquet-go panics on some malformed footers.
			if p := recover(); p != nil {
				f, err = nil, fmt.Errorf("malformed parquet footer: %v", p)
			}
		}()
		return parquet.OpenFile(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	}()
	if err != nil {
		return nil, fmt.Errorf("%s: open parquet: %w", name, err)
	}
	if err := checkPages(f, name); err != nil {
		return nil, err
	}
	return f, nil
}

// CheckSchema reports every column of want that f lacks, holds with another physical type, or
// holds as optional or repeated where want has a required (or less nested) column, naming the
// file. Extra columns in f are allowed, and so is a missing column that want holds as optional
// (a column added to a table later: files written before it read it as null). A nullable
// column is refused even when it holds no nulls: decoding into want's required fields would
// turn a null into a zero value unnoticed.
func CheckSchema(f *parquet.File, want *parquet.Schema, name string, columns ...string) error {
	var errs []error
	for _, path := range want.Columns() {
		if len(columns) > 0 && !contains(columns, path[0]) {
			continue
		}
		wl, _ := want.Lookup(path...)
		fl, ok := f.Schema().Lookup(path...)
		if !ok && optionalLeaf(wl) {
			continue
		} else if !ok {
			errs = append(errs, fmt.Errorf("missing column %s", strings.Join(path, ".")))
			continue
		}
		if wk, fk := wl.Node.Type().Kind(), fl.Node.Type().Kind(); wk != fk {
			errs = append(errs, fmt.Errorf("column %s is %v, want %v", strings.Join(path, "."), fk, wk))
		}
		switch {
		case fl.MaxRepetitionLevel > wl.MaxRepetitionLevel:
			errs = append(errs, fmt.Errorf("column %s is repeated, want one value a row", strings.Join(path, ".")))
		case fl.MaxDefinitionLevel > wl.MaxDefinitionLevel:
			errs = append(errs, fmt.Errorf("column %s is optional (nullable), want required: write it NOT NULL", strings.Join(path, ".")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: schema mismatch: %w", name, errors.Join(errs...))
	}
	return nil
}

// optionalLeaf reports whether a column is a top-level optional value (not repeated): one that
// may be absent from older files.
func optionalLeaf(l parquet.LeafColumn) bool {
	return len(l.Path) == 1 && l.MaxDefinitionLevel == 1 && l.MaxRepetitionLevel == 0 && l.Node.Optional()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

var (
	trajectorySchema = parquet.SchemaOf(Row{})
	advantageSchema  = parquet.SchemaOf(AdvantageRow{})
)

// TrajectorySchema is the Parquet schema of trajectory shards.
func TrajectorySchema() *parquet.Schema { return trajectorySchema }

// AdvantageSchema is the Parquet schema of advantage sidecars.
func AdvantageSchema() *parquet.Schema { return advantageSchema }

// ReadTrajectories decodes a whole trajectory part.
func ReadTrajectories(r io.ReaderAt, size int64, name string) ([]Row, error) {
	return readAll[Row](r, size, name, trajectorySchema)
}

// ReadAdvantages decodes a whole advantage sidecar.
func ReadAdvantages(r io.ReaderAt, size int64, name string) ([]AdvantageRow, error) {
	return readAll[AdvantageRow](r, size, name, advantageSchema)
}

// ReadTable decodes any table written with WriteTable, checking its schema against T.
func ReadTable[T any](r io.ReaderAt, size int64, name string) ([]T, error) {
	return readAll[T](r, size, name, parquet.SchemaOf(new(T)))
}

func readAll[T any](r io.ReaderAt, size int64, name string, schema *parquet.Schema) (rows []T, err error) {
	defer func() {
		// parquet-go panics on some malformed inputs; a bad file must be an error, not a crash.
		if p := recover(); p != nil {
			rows, err = nil, fmt.Errorf("%s: malformed parquet: %v", name, p)
		}
	}()
	f, err := OpenParquet(r, size, name)
	if err != nil {
		return nil, err
	}
	if err := CheckSchema(f, schema, name); err != nil {
		return nil, err
	}
	n := f.NumRows()
	if n < 0 || n > size*8 {
		// A row costs at least one bit of some column in any encoding we accept; a larger count
		// is a lie in the footer and would make us allocate without bound.
		return nil, fmt.Errorf("%s: footer claims %d rows in %d bytes", name, n, size)
	}
	// The footer's count is still not trusted for the allocation: a decoded row can be hundreds
	// of bytes (Row is 288), so n rows up to size*8 could ask for thousands of times the file.
	// Reserve what the file's bytes can plausibly hold and let append grow past it.
	out := make([]T, 0, min(n, size/16+1024))
	pr := parquet.NewGenericReader[T](f)
	defer pr.Close()
	buf := make([]T, 1024)
	for {
		k, err := pr.Read(buf)
		out = append(out, buf[:k]...)
		if int64(len(out)) > n {
			return nil, fmt.Errorf("%s: read more than the %d rows the footer says", name, n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read rows: %w", name, err)
		}
		if k == 0 {
			return nil, fmt.Errorf("%s: reader made no progress after %d rows", name, len(out))
		}
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("%s: read %d rows, footer says %d", name, len(out), n)
	}
	return out, nil
}
