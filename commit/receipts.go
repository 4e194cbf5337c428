package commit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/drmas-dev/drmas/storage"
)

// ReceiptsDir is the sub-folder of a stage folder where sharded workers leave one receipt per
// finished part. Receipts are not outputs: DuckDB globs of *.parquet never see them, and
// Finalize removes them once the folder is committed.
const ReceiptsDir = "_receipts"

// Receipt says that one part of a folder is written: its manifest entry, what it was computed
// from (Writer), and optional stage-specific partial results (e.g. per-agent statistics to
// merge at finalize).
type Receipt struct {
	File File `json:"file"`
	// Writer is Writer(m) of the manifest the worker will commit: parts computed from another
	// config, checkpoint or input have another Writer and are never committed together.
	Writer string          `json:"writer"`
	Extra  json.RawMessage `json:"extra,omitempty"`
	// ETag carries File.ETag (which manifests leave out) to the worker that finalizes, so that
	// its Commit confirms the part with a Stat instead of reading it back. Set by PutReceipt
	// from File.ETag and restored into it by ReadReceipt.
	ETag string `json:"etag,omitempty"`
}

// Writer identifies what a folder's parts are computed from: the digest of its manifest without
// the files (kind, run, iteration, config digest, inputs, params). Two workers of one folder
// that run another config or sample another checkpoint have different Writers, which is how
// Finalize tells mixed parts from a complete set.
func Writer(m *Manifest) string {
	c := *m
	c.Files, c.Rows = nil, 0
	data, err := json.Marshal(&c)
	if err != nil { // a Manifest holds strings, numbers and a map of strings: always encodable
		panic(fmt.Sprintf("commit: encode manifest: %v", err))
	}
	return Digest(data)
}

func receiptKey(dir, part string) string { return path.Join(dir, ReceiptsDir, part+".json") }

// PutReceipt records that part f of dir is written. Workers write receipts after the part
// itself, so a receipt always describes a complete object. Rewriting a receipt with the same
// content is harmless (deterministic outputs).
func PutReceipt(ctx context.Context, b storage.Bucket, dir string, r Receipt) error {
	if r.Writer == "" {
		return fmt.Errorf("receipt of %s: no writer", r.File.Name)
	}
	r.ETag = r.File.ETag
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode receipt: %w", err)
	}
	// A receipt need not be durable: the sidecar it vouches for already is, and a receipt lost
	// in a crash only makes a rerun redo its part.
	if err := storage.PutBytes(ctx, b, receiptKey(dir, r.File.Name), data, storage.NoSync()); err != nil {
		return fmt.Errorf("write receipt of %s: %w", r.File.Name, err)
	}
	return nil
}

// ReadReceipt returns the receipt of part, and false if there is none (or it is unreadable, in
// which case the part is simply redone).
func ReadReceipt(ctx context.Context, b storage.Bucket, dir, part string) (Receipt, bool, error) {
	data, err := storage.ReadAll(ctx, b, receiptKey(dir, part))
	if storage.IsNotFound(err) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, err
	}
	var r Receipt
	if json.Unmarshal(data, &r) != nil || r.File.Name != part {
		return Receipt{}, false, nil
	}
	r.File.ETag = r.ETag
	return r, true, nil
}

// HavePart reports whether part has a receipt from writer whose file exists with the recorded
// size: a worker that finds one skips the part (resume). A part written by another writer
// (another config or checkpoint) is not had: the worker redoes it.
func HavePart(ctx context.Context, b storage.Bucket, dir, part, writer string) (Receipt, bool, error) {
	r, ok, err := ReadReceipt(ctx, b, dir, part)
	if err != nil || !ok || r.Writer != writer {
		return r, false, err
	}
	ok, err = partWritten(ctx, b, dir, r)
	return r, ok, err
}

// partWritten reports whether the file a receipt vouches for exists with the recorded size.
func partWritten(ctx context.Context, b storage.Bucket, dir string, r Receipt) (bool, error) {
	attr, err := b.Stat(ctx, path.Join(dir, r.File.Name))
	if storage.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return attr.Size == r.File.Bytes, nil
}

// Finalize commits dir once every part in parts has a receipt: it fills m.Files (and m.Rows)
// from the receipts in part order (every receipt must come from Writer(m): parts of workers
// that ran another config or checkpoint are an error, and nothing is committed), calls merge (if not nil) with the receipts in part order so
// the caller can complete m (and write summary files, whose entries merge returns), commits
// the manifest with an only-if-absent put, and removes the receipts. It returns false (and
// commits nothing) while some part is missing, unless another worker committed the folder
// meanwhile (and removed the receipts): then it returns true and that manifest's sha256, or an
// error matching ErrConflict if that worker ran another config, checkpoint or input.
// Finalize is idempotent and may be called by every worker: the first complete call commits,
// later ones confirm the identical manifest.
//
// Removing the receipts is best effort: once the folder is committed, Finalize returns true and
// the manifest's sha256 even if the removal fails, with an error that matches ErrReceiptsLeft
// (and nothing else to handle): the caller should report it as a warning, not fail, since the
// folder is committed. Leftover receipts are harmless: no reader looks under _receipts/ (they
// read the files the manifest lists), and the next Finalize or CleanReceipts removes them.
func Finalize(ctx context.Context, b storage.Bucket, dir string, parts []string, m *Manifest, merge func([]Receipt) ([]File, error)) (bool, string, error) {
	writer := Writer(m)
	// committed is the folder committed by another worker: done, if by a worker of this one's
	// config and inputs; if not, this worker's parts were not committed (and may have been
	// refused by PutFile or overwritten): a conflict, not a success.
	committed := func(c *Manifest, sha string) (bool, string, error) {
		if Writer(c) != writer {
			return false, "", &ConflictError{Dir: dir, State: OtherWorker,
				What: fmt.Sprintf("%s was committed by a worker with another config, checkpoint or input than this one (every worker of a folder must run the same): this worker's parts are not in it", dir)}
		}
		return true, sha, leftover(CleanReceipts(ctx, b, dir))
	}
	if c, sha, err := Read(ctx, b, dir); err == nil {
		return committed(c, sha)
	} else if !errors.Is(err, ErrNotCommitted) {
		return false, "", err
	}
	var recs []Receipt
	var foreign []string
	for _, p := range parts {
		r, ok, err := ReadReceipt(ctx, b, dir, p)
		if err != nil {
			return false, "", err
		}
		if ok && r.Writer != writer {
			foreign = append(foreign, p)
			continue
		}
		if ok {
			ok, err = partWritten(ctx, b, dir, r)
		}
		if err != nil {
			return false, "", err
		}
		if !ok {
			// Another worker may have committed the folder (and removed its receipts) since
			// the check above: then the folder is done, not waiting for this part.
			if c, sha, err := Read(ctx, b, dir); err == nil {
				return committed(c, sha)
			} else if !errors.Is(err, ErrNotCommitted) {
				return false, "", err
			}
			return false, "", nil
		}
		recs = append(recs, r)
	}
	if len(foreign) > 0 {
		return false, "", &ConflictError{Dir: dir, File: strings.Join(foreign, ", "), State: ForeignParts,
			What: fmt.Sprintf("%s: %s written by a worker with another config, checkpoint or input than this one (every worker of a folder must run the same)", dir, strings.Join(foreign, ", "))}
	}
	m.Files, m.Rows = nil, 0
	for _, r := range recs {
		m.Files = append(m.Files, r.File)
		m.Rows += r.File.Rows
	}
	if merge != nil {
		extra, err := merge(recs)
		if err != nil {
			return false, "", err
		}
		m.Files = append(m.Files, extra...)
	}
	sha, err := Commit(ctx, b, dir, m)
	if err != nil {
		return false, "", err
	}
	return true, sha, leftover(CleanReceipts(ctx, b, dir))
}

// ErrReceiptsLeft marks the error of a receipt removal that failed after the folder was
// committed (Finalize, CleanReceipts): the folder is committed and its receipts are harmless
// leftovers, so it is a warning, not a failure.
var ErrReceiptsLeft = errors.New("receipts left behind (harmless: a later run of the stage removes them once the store allows it)")

// leftover marks a failed removal of a committed folder's receipts (nil stays nil).
func leftover(err error) error {
	if err == nil || errors.Is(err, ErrReceiptsLeft) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrReceiptsLeft, err)
}

// CleanReceipts removes the receipts of a committed folder. It is best effort: a failure
// (which matches ErrReceiptsLeft) leaves harmless leftovers that the next Finalize or
// CleanReceipts removes, so callers report it as a warning.
func CleanReceipts(ctx context.Context, b storage.Bucket, dir string) error {
	var keys []string
	if err := b.Iter(ctx, path.Join(dir, ReceiptsDir)+"/", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		return leftover(fmt.Errorf("list receipts of %s: %w", dir, err))
	}
	// Every receipt is tried: one that cannot be removed does not keep the others.
	var first error
	left := 0
	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			if ctx.Err() != nil {
				return leftover(err)
			}
			if first == nil {
				first = err // the store's error names the key
			}
			left++
		}
	}
	if left > 1 {
		return leftover(fmt.Errorf("%d of %d receipts of %s: %w", left, len(keys), dir, first))
	}
	return leftover(first)
}

// DecodeExtra unmarshals a receipt's extra payload strictly.
func DecodeExtra(r Receipt, v any) error {
	dec := json.NewDecoder(bytes.NewReader(r.Extra))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return fmt.Errorf("receipt of %s: %w", r.File.Name, err)
	}
	return nil
}
