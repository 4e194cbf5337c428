package analysis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/storage"
)

// Folder is one committed folder of a run that a view reads.
type Folder struct {
	View     string // rollouts, advantages, diagnostics, metrics, evals, ablations
	Dir      string // store key of the folder
	Manifest *commit.Manifest
}

// SyncStats counts what Sync did.
type SyncStats struct {
	Folders    int   // committed folders found
	Files      int   // files listed by their manifests
	Bytes      int64 // bytes listed by their manifests
	Downloaded int   // files fetched from the store
	Refetched  int   // of those, files that were cached but did not match their manifest
	Cached     int   // files already cached with the right sha256
}

// viewKinds maps a view to the manifest kind of its folders.
var viewKinds = map[string]string{
	"rollouts": "rollout", "advantages": "advantage", "diagnostics": "diagnostics",
	"metrics": "learn", "evals": "eval", "train_evals": "eval", "ablations": "ablation",
}

// classify returns the view a committed folder of run belongs to ("" if none). rel is the
// folder relative to runs/<run>/.
func classify(rel string) string {
	el := strings.Split(rel, "/")
	switch {
	case len(el) == 2 && strings.HasPrefix(el[0], "iter=") && el[1] == "rollout":
		return "rollouts"
	case len(el) == 3 && strings.HasPrefix(el[0], "iter=") && el[1] == "advantage" && strings.HasPrefix(el[2], "est="):
		return "advantages"
	case len(el) == 3 && strings.HasPrefix(el[0], "iter=") && el[1] == "diagnostics" && strings.HasPrefix(el[2], "est="):
		return "diagnostics"
	case len(el) == 2 && strings.HasPrefix(el[0], "iter=") && el[1] == "learn":
		return "metrics"
	case len(el) == 2 && el[0] == "eval" && strings.HasPrefix(el[1], "step="):
		return "evals"
	case len(el) == 2 && el[0] == "eval-train" && strings.HasPrefix(el[1], "step="):
		return "train_evals"
	case len(el) == 2 && el[0] == "ablations":
		return "ablations"
	}
	return ""
}

// ListFolders returns the committed folders of run that the views read, sorted by key. Only
// folders with a manifest are listed; a manifest of the wrong kind is an error.
func ListFolders(ctx context.Context, b storage.Bucket, run string) ([]Folder, error) {
	if err := layout.ValidateRunName(run); err != nil {
		return nil, err
	}
	root := layout.RunDir(run) + "/"
	var dirs []string
	err := b.Iter(ctx, root, func(key string) error {
		if path.Base(key) != commit.ManifestName {
			return nil
		}
		dir := path.Dir(key)
		if classify(strings.TrimPrefix(dir, root)) != "" {
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list run %s: %w", run, err)
	}
	sort.Strings(dirs)
	out := make([]Folder, 0, len(dirs))
	for _, dir := range dirs {
		m, _, err := commit.Read(ctx, b, dir)
		if errors.Is(err, commit.ErrNotCommitted) {
			continue // deleted since listed
		}
		if err != nil {
			return nil, err
		}
		view := classify(strings.TrimPrefix(dir, root))
		if m.Kind != viewKinds[view] {
			return nil, fmt.Errorf("%s: manifest kind %q, want %q", dir, m.Kind, viewKinds[view])
		}
		out = append(out, Folder{View: view, Dir: dir, Manifest: m})
	}
	return out, nil
}

// fileView is the view a file of a folder of view belongs to: an evaluation folder holds the
// per-source results and the per-prompt counts (of both splits in one view).
func fileView(view, name string) string {
	if (view == "evals" || view == "train_evals") && name == shards.EvalPromptsFile {
		return "eval_prompts"
	}
	return view
}

// CachePath is where the cache under root keeps the object key.
func CachePath(root, key string) string { return filepath.Join(root, filepath.FromSlash(key)) }

// Sync makes every file of folders present in the cache under root with the sha256 its manifest
// lists: cached files that match are kept, missing or mismatching ones are downloaded through
// the bucket and verified before they are written (atomically). A file whose stored content
// differs from its manifest is refused with an error. It returns the local path of each file,
// per view.
func Sync(ctx context.Context, b storage.Bucket, root string, folders []Folder) (map[string][]string, SyncStats, error) {
	var st SyncStats
	paths := map[string][]string{}
	for _, f := range folders {
		st.Folders++
		for _, file := range f.Manifest.Files {
			if err := ctx.Err(); err != nil {
				return nil, st, err
			}
			key := path.Join(f.Dir, file.Name)
			local := CachePath(root, key)
			st.Files++
			st.Bytes += file.Bytes
			ok, existed, err := cachedOK(local, file)
			if err != nil {
				return nil, st, err
			}
			if !ok {
				data, err := commit.ReadFile(ctx, b, f.Dir, file)
				if err != nil {
					return nil, st, fmt.Errorf("refusing %s from %s: %w", key, b.Name(), err)
				}
				if err := writeAtomic(local, data); err != nil {
					return nil, st, err
				}
				st.Downloaded++
				if existed {
					st.Refetched++
				}
			} else {
				st.Cached++
			}
			v := fileView(f.View, file.Name)
			paths[v] = append(paths[v], local)
		}
	}
	return paths, st, nil
}

// cachedOK reports whether local holds exactly the manifest's bytes, and whether it exists.
func cachedOK(local string, f commit.File) (ok, exists bool, err error) {
	fh, err := os.Open(local)
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("cache: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return false, true, fmt.Errorf("cache: %w", err)
	}
	if fi.Size() != f.Bytes {
		return false, true, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return false, true, fmt.Errorf("cache: read %s: %w", local, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == f.SHA256, true, nil
}

func writeAtomic(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cache: write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// DefaultCacheDir is ~/.cache/drmas/<hash of the store URL> (the user cache dir of the OS). A
// plain path is made absolute first, so two spellings of one folder share a cache.
func DefaultCacheDir(storeURL string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache dir (set --cache): %w", err)
	}
	return filepath.Join(base, "drmas", StoreHash(storeURL)), nil
}

// StoreHash is the cache folder name of a store URL: 16 hex digits of its sha256.
func StoreHash(storeURL string) string {
	u := storeURL
	if !strings.Contains(u, "://") {
		if abs, err := filepath.Abs(u); err == nil {
			u = "file://" + filepath.ToSlash(abs)
		}
	}
	u = strings.TrimRight(u, "/")
	s := sha256.Sum256([]byte(u))
	return hex.EncodeToString(s[:8])
}
