// Package commit is drmas's commit protocol over a storage.Bucket (the folders it commits are
// named by package layout).
//
// A stage writes its output files under a folder, then commits the folder by writing
// _MANIFEST.json last, with an "only if absent" put. Readers look only at committed folders
// (a manifest exists) and verify file sizes against it (and sha256 on request), so a crash at
// any point leaves either no visible output or a complete one. Output names and bytes are
// deterministic, so a rerun that finds its manifest already written with identical content
// treats it as done, and one that finds different content reports a conflict.
package commit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage"
)

// ManifestName is the commit marker of a folder.
const ManifestName = "_MANIFEST.json"

// maxManifestBytes bounds what Read will load: a manifest lists files, not data.
const maxManifestBytes = 16 << 20

// ErrNotCommitted says a folder has no manifest (yet).
var ErrNotCommitted = errors.New("not committed")

// ErrConflict says a folder was already committed with different content.
var ErrConflict = errors.New("commit conflict")

// ErrWithdrawn says a folder's commit was withdrawn (its manifest deleted again) because a
// concurrent writer with other bytes replaced one of its files: the folder is uncommitted, as
// before the commit. Errors that match it also match ErrConflict.
var ErrWithdrawn = errors.New("commit withdrawn")

var errWithdrawn = fmt.Errorf("%w: %w", ErrWithdrawn, ErrConflict)

// File is one committed file of a folder.
type File struct {
	Name   string `json:"name"` // relative to the folder, may contain "/"; not _MANIFEST.json or under _receipts/
	Rows   int64  `json:"rows,omitempty"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// ETag is the store's ETag of the object this process uploaded (PutFile records it). It is
	// not part of the manifest: Commit uses it to confirm with one Stat that the object still
	// holds these bytes, instead of reading it back. Empty when unknown (Commit reads the file).
	ETag string `json:"-"`
}

// Input names a committed folder an output was computed from.
type Input struct {
	Dir            string `json:"dir"`
	ManifestSHA256 string `json:"manifest_sha256"`
}

// Manifest describes a committed folder. Its JSON encoding is deterministic.
type Manifest struct {
	Kind          string            `json:"kind"` // rollout, advantage, diagnostics, learn, checkpoint, eval
	SchemaVersion int               `json:"schema_version"`
	Run           string            `json:"run"`
	Iteration     *int              `json:"iteration,omitempty"`
	Step          *int64            `json:"step,omitempty"`
	Parent        *int64            `json:"parent,omitempty"`
	Rows          int64             `json:"rows"`
	Files         []File            `json:"files"`
	ConfigDigest  string            `json:"config_digest,omitempty"`
	Inputs        []Input           `json:"inputs,omitempty"`
	Params        map[string]string `json:"params,omitempty"`
}

// ComputedFrom reports whether m lists dir as an input whose manifest had sha256 sha: whether
// what m's folder holds was computed from the folder committed in dir now. A folder deleted
// and committed again with other content (a rollout rolled out or imported anew) has another
// manifest, so the outputs of the old one are not taken for outputs of the new.
func (m *Manifest) ComputedFrom(dir, sha string) bool {
	for _, in := range m.Inputs {
		if in.Dir == dir {
			return in.ManifestSHA256 == sha
		}
	}
	return false
}

// Validate reports every problem of m at once.
func (m *Manifest) Validate() error {
	var errs []error
	if m.Kind == "" {
		errs = append(errs, errors.New("kind is empty"))
	}
	if err := layout.ValidateRunName(m.Run); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	var rows int64
	overflow := false
	for i, f := range m.Files {
		if err := storage.ValidateKey(f.Name); err != nil {
			errs = append(errs, fmt.Errorf("file %d: %w", i, err))
		} else if reserved(f.Name) {
			errs = append(errs, fmt.Errorf("file %q: the name is reserved for the commit protocol (%s, %s/)", f.Name, ManifestName, ReceiptsDir))
		}
		if seen[f.Name] {
			errs = append(errs, fmt.Errorf("file %q listed twice", f.Name))
		}
		seen[f.Name] = true
		if f.Bytes < 0 || f.Rows < 0 {
			errs = append(errs, fmt.Errorf("file %q: negative size or rows", f.Name))
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("file %q: sha256 %q is not 64 hex digits", f.Name, f.SHA256))
		}
		if f.Rows > 0 && rows > math.MaxInt64-f.Rows {
			overflow = true
		}
		rows += f.Rows
	}
	switch {
	case overflow:
		errs = append(errs, errors.New("the rows of the files add up to more than 2^63-1"))
	case rows != m.Rows:
		errs = append(errs, fmt.Errorf("rows %d, but files add up to %d", m.Rows, rows))
	}
	return errors.Join(errs...)
}

// Encode returns the deterministic JSON encoding of m, with files sorted by name.
func Encode(m *Manifest) ([]byte, error) {
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Name < m.Files[j].Name })
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("invalid manifest: %w", err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(data, '\n'), nil
}

// Decode parses and validates a manifest; name is used in errors. Unknown fields are errors.
func Decode(data []byte, name string) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: parse manifest: %w", name, err)
	}
	// dec.More is false before a stray "]" or "}": ask for the next token instead.
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after manifest", name)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &m, nil
}

// reserved reports whether a file name of a folder would collide with the folder's manifest
// or receipts (which Finalize deletes).
func reserved(name string) bool {
	return name == ManifestName || name == ReceiptsDir || strings.HasPrefix(name, ReceiptsDir+"/")
}

// Digest is the hex sha256 of data.
func Digest(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// PutFile uploads data as dir/name and returns its manifest entry. Output names and bytes are
// deterministic, so it overwrites what an earlier attempt left, but never a file of a committed
// folder with other bytes: if dir is committed and its manifest does not list name with data's
// sha256 (another writer, with another config, committed it first), it returns an error matching
// ErrConflict and writes nothing. (Rewriting a committed file with its listed bytes repairs it.)
//
// Another writer may commit dir between that check and the upload. PutFile reads the manifest
// again after uploading: if the upload replaced a file that manifest lists with other bytes, the
// folder no longer holds what it says, so PutFile withdraws that commit (deletes the manifest:
// the folder is uncommitted again, as before it, and a rerun redoes it) and returns an error
// matching ErrConflict. Together with Commit's checks of the files before and after it writes
// the manifest, no interleaving of two writers leaves a committed folder with a file it does
// not list; only a writer killed between its upload and its check, or whose check or withdrawal
// fails (a store error, which it reports), can, and readers refuse such a folder (sizes and
// digests). A withdrawing upload then removes itself, so that the withdrawn writer's rerun
// writes its file again rather than resume over these bytes.
func PutFile(ctx context.Context, b storage.Bucket, dir, name string, data []byte, rows int64) (File, error) {
	f := File{Name: name, Rows: rows, Bytes: int64(len(data)), SHA256: Digest(data)}
	return putChecked(ctx, b, dir, f, func() (io.Reader, error) { return bytes.NewReader(data), nil })
}

// putChecked is PutFile for the file f describes, whose bytes open returns (called once).
func putChecked(ctx context.Context, b storage.Bucket, dir string, f File, open func() (io.Reader, error)) (File, error) {
	name := f.Name
	if m, _, err := Read(ctx, b, dir); err == nil {
		if !lists(m, f) {
			return File{}, &ConflictError{Dir: dir, File: name, State: Kept,
				What: fmt.Sprintf("%s is committed with other content than this %s (by a writer with another config or input, or whose output differs, as a model server's may): not overwritten", dir, name)}
		}
	} else if !errors.Is(err, ErrNotCommitted) {
		return File{}, err
	}
	r, err := open()
	if err != nil {
		return File{}, fmt.Errorf("upload %s: %w", name, err)
	}
	if err := b.Put(ctx, path.Join(dir, name), r, f.Bytes, storage.RecordETag(&f.ETag)); err != nil {
		return File{}, fmt.Errorf("upload %s: %w", name, err)
	}
	m, sha, err := Read(ctx, b, dir)
	switch {
	case errors.Is(err, ErrNotCommitted):
		return f, nil
	case err != nil:
		return File{}, err
	case lists(m, f):
		return f, nil // committed meanwhile by a writer of the same bytes
	}
	i := slices.IndexFunc(m.Files, func(c File) bool { return c.Name == name })
	if i < 0 {
		// The other writer's folder has no such file: the object is a stray in it (this
		// upload, or a later one of the same name), which no commit of the folder can list and
		// no reader looks at; remove it (best effort).
		b.Delete(ctx, path.Join(dir, name))
		return File{}, &ConflictError{Dir: dir, File: name, State: Kept,
			What: fmt.Sprintf("%s was committed by another writer (with another config or input) while this one wrote %s: not in it", dir, name)}
	}
	attr, err := b.Stat(ctx, path.Join(dir, name))
	if err != nil || f.ETag == "" {
		// Whether this upload still holds the file is unknown: the folder may be committed
		// over it, which readers refuse; say so rather than that nothing was overwritten.
		why := "the store records no ETag"
		if err != nil {
			why = err.Error()
		}
		return File{}, &ConflictError{Dir: dir, File: name, State: Unsure,
			What: fmt.Sprintf("%s was committed by another writer (with another config or input) while this one wrote %s, which this upload may have replaced (checking it failed: %s)", dir, name, why)}
	}
	if attr.ETag != f.ETag {
		// Replaced again since this upload, by a writer whose own checks cover it.
		return File{}, &ConflictError{Dir: dir, File: name, State: Kept,
			What: fmt.Sprintf("%s was committed by another writer (with another config or input) while this one wrote %s: this upload is not in it", dir, name)}
	}
	if err := Withdraw(ctx, b, dir, sha); err != nil {
		return File{}, &ConflictError{Dir: dir, File: name, State: Unsure, Err: err,
			What: fmt.Sprintf("%s was committed by another writer (with another config or input) while this one wrote %s, which this upload replaced, and withdrawing that commit failed (readers refuse the folder)", dir, name)}
	}
	// This upload is now a stray in an uncommitted folder: remove it (best effort), so that a
	// rerun of the withdrawn writer finds its file missing and writes it again, instead of
	// resuming over this writer's bytes (a receipt vouches only for a size; learn's rerun
	// commits the metrics it finds).
	_ = RemoveUpload(ctx, b, dir, f)
	return File{}, &ConflictError{Dir: dir, File: name, State: Uncommitted, Withdrawn: true,
		What: fmt.Sprintf("%s was committed by another writer (with another config or input) while this one wrote %s, and this upload replaced its %s, so that commit is withdrawn: the folder is uncommitted again", dir, name, name)}
}

// RemoveUpload deletes dir/f.Name if the object is still the upload f records (its ETag, which
// PutFile sets) and dir is not committed: a writer's own stray upload, never another writer's
// bytes that replaced it since, nor a file of a committed folder. It is best effort: an object
// replaced between the check and the delete is deleted too, which its writer's Commit then
// finds missing and refuses.
func RemoveUpload(ctx context.Context, b storage.Bucket, dir string, f File) error {
	key := path.Join(dir, f.Name)
	attr, err := b.Stat(ctx, key)
	if storage.IsNotFound(err) || (err == nil && (f.ETag == "" || attr.ETag != f.ETag)) {
		return nil
	}
	if err != nil {
		return err
	}
	if done, err := IsCommitted(ctx, b, dir); err != nil || done {
		return err
	}
	return b.Delete(ctx, key)
}

// lists reports whether m lists f's name with f's bytes.
func lists(m *Manifest, f File) bool {
	i := slices.IndexFunc(m.Files, func(c File) bool { return c.Name == f.Name })
	return i >= 0 && m.Files[i].SHA256 == f.SHA256 && m.Files[i].Bytes == f.Bytes
}

// Withdraw deletes dir's manifest if it is still the one with sha256 sha: the folder no longer
// holds what the manifest lists (a concurrent writer replaced a file), or what it holds
// describes something that is gone, so the commit is undone rather than left for readers to
// refuse. The folder is then uncommitted, the state before the commit, and a rerun redoes it
// (outputs computed from it record its manifest's sha256, which a rerun of the same settings
// reproduces, and which other settings do not).
func Withdraw(ctx context.Context, b storage.Bucket, dir, sha string) error {
	key := path.Join(dir, ManifestName)
	data, err := storage.ReadAll(ctx, b, key)
	if storage.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("withdraw commit of %s: %w", dir, err)
	}
	if Digest(data) != sha {
		return nil // committed anew since: not the commit this writer saw
	}
	if err := b.Delete(ctx, key); err != nil {
		return fmt.Errorf("withdraw commit of %s: %w", dir, err)
	}
	return nil
}

// maxSettleTries bounds how often settle re-reads a file that keeps changing while it reads it.
const maxSettleTries = 5

// errReplaced says a file holds other bytes than its manifest entry, or is gone.
var errReplaced = errors.New("holds other bytes than this writer's")

// settle confirms that dir's files hold the bytes the entries list, and returns the ETag of the
// version it confirmed for each. A file whose ETag is the one its entry records (uploaded by
// this process) is confirmed with one Stat; any other is read back and hashed, between two
// Stats that must agree (a writer of the same bytes may replace it meanwhile: then it reads
// again). A file with other bytes gives an error matching errReplaced.
func settle(ctx context.Context, b storage.Bucket, dir string, files []File) ([]string, error) {
	tags := make([]string, len(files))
	for i, f := range files {
		tag, err := settleFile(ctx, b, dir, f, f.ETag)
		if err != nil {
			return nil, err
		}
		tags[i] = tag
	}
	return tags, nil
}

// settleFile confirms one file (see settle); known is an ETag whose version is known to hold
// f's bytes, or "". A file that is gone, at any of its steps, is replaced too: a writer whose
// upload replaced it may withdraw the commit and remove its own upload (PutFile) at any moment.
func settleFile(ctx context.Context, b storage.Bucket, dir string, f File, known string) (string, error) {
	key := path.Join(dir, f.Name)
	tag, err := confirmFile(ctx, b, key, f, known)
	if storage.IsNotFound(err) {
		return "", fmt.Errorf("%s is gone: %w", key, errReplaced)
	}
	return tag, err
}

// confirmFile is settleFile without the mapping of a missing object.
func confirmFile(ctx context.Context, b storage.Bucket, key string, f File, known string) (string, error) {
	for try := 0; ; try++ {
		before, err := b.Stat(ctx, key)
		if err != nil {
			return "", err
		}
		if before.Size != f.Bytes {
			return "", fmt.Errorf("%s: %d bytes, this writer's are %d: %w", key, before.Size, f.Bytes, errReplaced)
		}
		if known != "" && before.ETag == known {
			return known, nil
		}
		data, err := storage.ReadAll(ctx, b, key)
		if err != nil {
			return "", err
		}
		if Digest(data) != f.SHA256 {
			return "", fmt.Errorf("%s: sha256 %.12s, this writer's is %.12s: %w", key, Digest(data), f.SHA256, errReplaced)
		}
		after, err := b.Stat(ctx, key)
		if err != nil {
			return "", err
		}
		if after.ETag == before.ETag {
			return after.ETag, nil
		}
		if try+1 >= maxSettleTries {
			return "", fmt.Errorf("%s changed %d times while being checked: another writer keeps replacing it", key, maxSettleTries)
		}
	}
}

// Commit writes dir's manifest with an "only if absent" put. If the folder is already
// committed with byte-identical content, Commit succeeds (a rerun); if with other content, it
// returns an error matching ErrConflict. It returns the manifest's sha256.
//
// Before writing the manifest, Commit confirms that every file m lists holds the listed bytes
// (one Stat for a file this process uploaded with PutFile, else a read), and after writing it,
// that none was replaced meanwhile (one Stat each): a file another writer replaced before the
// commit is an error matching ErrConflict (nothing committed), and one replaced after it
// withdraws the commit (the manifest is deleted again) with such an error.
func Commit(ctx context.Context, b storage.Bucket, dir string, m *Manifest) (string, error) {
	data, err := Encode(m)
	if err != nil {
		return "", err
	}
	sha := Digest(data)
	key := path.Join(dir, ManifestName)
	// other says whether dir is committed with other content than data (the usual conflict).
	// It reports whether there is a manifest at all.
	other := func() (bool, error) {
		old, err := storage.ReadAll(ctx, b, key)
		if storage.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("commit %s: read existing manifest: %w", dir, err)
		}
		if !bytes.Equal(old, data) {
			return true, fmt.Errorf("commit %s: already committed with different content (existing sha256 %s, new %s): %w",
				dir, Digest(old)[:12], sha[:12], ErrConflict)
		}
		return true, nil
	}
	tags, err := settle(ctx, b, dir, m.Files)
	if errors.Is(err, errReplaced) {
		if _, oerr := other(); oerr != nil {
			return "", oerr
		}
		return "", &ConflictError{Dir: dir, State: Uncommitted, Err: err,
			What: fmt.Sprintf("commit %s: another writer (with another config or input, or whose output differs) replaced a file while this one worked: not committed", dir)}
	}
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", dir, err)
	}
	for try := 0; ; try++ {
		err = storage.PutBytes(ctx, b, key, data, storage.IfAbsent())
		if err == nil {
			break
		}
		if !storage.IsAlreadyExists(err) {
			return "", fmt.Errorf("commit %s: %w", dir, err)
		}
		found, err := other()
		if err != nil {
			return "", err
		}
		if found {
			break // the identical manifest (a rerun, or a writer of the same bytes)
		}
		// The manifest the put met is gone: its writer withdrew it (it found a file replaced,
		// by this writer) before other read it. The folder is uncommitted: put this one again
		// rather than report a commit that is not there.
		if try+1 >= maxSettleTries {
			return "", fmt.Errorf("commit %s: the manifest was put and withdrawn %d times while this writer committed: another writer keeps committing it: %w", dir, maxSettleTries, ErrConflict)
		}
	}
	for i, f := range m.Files {
		if _, err := settleFile(ctx, b, dir, f, tags[i]); err != nil {
			if !errors.Is(err, errReplaced) {
				return "", fmt.Errorf("commit %s: check the files after the commit: %w", dir, err)
			}
			if werr := Withdraw(ctx, b, dir, sha); werr != nil {
				return "", &ConflictError{Dir: dir, State: Unsure, Err: fmt.Errorf("%w (withdrawing: %w)", err, werr),
					What: fmt.Sprintf("commit %s: a file was replaced by another writer right after the commit, and withdrawing the commit failed (readers refuse the folder)", dir)}
			}
			return "", &ConflictError{Dir: dir, State: Uncommitted, Withdrawn: true, Err: err,
				What: fmt.Sprintf("commit %s: a file was replaced by another writer (with another config or input) right after the commit, so the commit is withdrawn: the folder is uncommitted again", dir)}
		}
	}
	return sha, nil
}

// Read returns dir's manifest and its sha256, or an error matching ErrNotCommitted.
func Read(ctx context.Context, b storage.Bucket, dir string) (*Manifest, string, error) {
	key := path.Join(dir, ManifestName)
	rc, err := b.Get(ctx, key)
	if storage.IsNotFound(err) {
		return nil, "", fmt.Errorf("%s: %w", dir, ErrNotCommitted)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read manifest %s: %w", dir, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		// A failure mid-body (a reset connection) is the store's, like Get's errors: name the
		// store and key, and let callers tell it from a damaged manifest (storage.KeyError).
		return nil, "", fmt.Errorf("read manifest %s: %w", dir, &storage.KeyError{Op: "read", Bucket: b.Name(), Key: key, Err: err})
	}
	if len(data) > maxManifestBytes {
		return nil, "", fmt.Errorf("%s: manifest larger than %d bytes", key, maxManifestBytes)
	}
	m, err := Decode(data, key)
	if err != nil {
		return nil, "", err
	}
	return m, Digest(data), nil
}

// IsCommitted reports whether dir has a manifest.
func IsCommitted(ctx context.Context, b storage.Bucket, dir string) (bool, error) {
	_, err := b.Stat(ctx, path.Join(dir, ManifestName))
	if storage.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat manifest %s: %w", dir, err)
	}
	return true, nil
}

// Verify checks that every file m lists exists under dir with the listed size, and with deep
// also the listed sha256. It reports every mismatch at once.
func Verify(ctx context.Context, b storage.Bucket, dir string, m *Manifest, deep bool) error {
	var errs []error
	for _, f := range m.Files {
		key := path.Join(dir, f.Name)
		if deep {
			data, err := storage.ReadAll(ctx, b, key)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if int64(len(data)) != f.Bytes || Digest(data) != f.SHA256 {
				errs = append(errs, fmt.Errorf("%s: content (%d bytes, sha256 %.12s) differs from manifest (%d bytes, %.12s)",
					key, len(data), Digest(data), f.Bytes, f.SHA256))
			}
			continue
		}
		attr, err := b.Stat(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if attr.Size != f.Bytes {
			errs = append(errs, fmt.Errorf("%s: %d bytes, manifest says %d", key, attr.Size, f.Bytes))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("verify %s: %w", dir, err)
	}
	return nil
}

// ReadFile downloads one committed file and checks it against its manifest entry.
func ReadFile(ctx context.Context, b storage.Bucket, dir string, f File) ([]byte, error) {
	key := path.Join(dir, f.Name)
	data, err := storage.ReadAll(ctx, b, key)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != f.Bytes || Digest(data) != f.SHA256 {
		return nil, fmt.Errorf("%s: content (%d bytes, sha256 %.12s) differs from manifest (%d bytes, %.12s)",
			key, len(data), Digest(data), f.Bytes, f.SHA256)
	}
	return data, nil
}
