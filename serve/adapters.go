package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/layout"
)

// MaxLoRANameBytes bounds a lora_name: it is echoed in answers, logs and GET /v1/models.
const MaxLoRANameBytes = 256

// checkLoRAName refuses a name that is too long to echo or holds control characters.
func checkLoRAName(name string) *httpError {
	if len(name) > MaxLoRANameBytes {
		return &httpError{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("lora_name %s is longer than %d bytes", excerpt.Quote(name), MaxLoRANameBytes)}
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return &httpError{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("lora_name %s has control characters", excerpt.Quote(name))}
	}
	return nil
}

// location is a lora_path or an adapter root: a local folder (also when written file://…) or
// a store URL, cleaned (no ./, // or .. left).
type location struct {
	scheme string // "" for a local folder
	path   string
}

func parseLocation(p string) (location, error) {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		p = rest
	}
	scheme, rest, isURL := strings.Cut(p, "://")
	if !isURL {
		abs, err := filepath.Abs(p)
		return location{path: abs}, err
	}
	if scheme == "" || strings.ContainsAny(scheme, "/.") {
		return location{}, fmt.Errorf("not a folder or a store URL")
	}
	return location{scheme: scheme, path: path.Clean("/" + rest)[1:]}, nil
}

func (l location) String() string {
	if l.scheme == "" {
		return l.path
	}
	return l.scheme + "://" + l.path
}

// under reports whether l is root or below it; with checkpoints, l must also be below a run's
// checkpoints folder there (<root>/runs/<run>/checkpoints/…).
func (l location) under(root location, checkpoints bool) bool {
	if l.scheme != root.scheme {
		return false
	}
	sep, rel := "/", ""
	if l.scheme == "" {
		sep = string(filepath.Separator)
		r, err := filepath.Rel(root.path, l.path)
		if err != nil || r == ".." || strings.HasPrefix(r, ".."+sep) {
			return false
		}
		rel = r
	} else {
		base := strings.TrimSuffix(root.path, "/")
		if l.path != base && !strings.HasPrefix(l.path, base+"/") && base != "" {
			return false
		}
		rel = strings.TrimPrefix(strings.TrimPrefix(l.path, base), "/")
	}
	if !checkpoints {
		return true
	}
	rel = strings.ReplaceAll(rel, sep, "/")
	parts := strings.Split(rel, "/")
	return len(parts) >= 4 && strings.HasPrefix(rel, layout.CheckpointsDir(parts[1])+"/")
}

// adapterDir is the local folder to read lora_path's adapter from, and what to call once it is
// read: a local folder (under AdapterRoot, symlinks resolved) is read in place; a store folder
// has its two adapter files, and nothing else, fetched into a temporary folder that cleanup
// removes, whether the load succeeds or not.
func (s *Server) adapterDir(ctx context.Context, loraPath string) (dir string, cleanup func(), herr *httpError) {
	notFound := func(err error) *httpError {
		return &httpError{http.StatusNotFound, "NotFoundError", fmt.Sprintf("No adapter found for %s: %v", excerpt.Name(loraPath), err)}
	}
	loc, err := parseLocation(loraPath)
	if err != nil {
		return "", nil, badRequest("lora_path %s: %v", excerpt.Name(loraPath), err)
	}
	if loc.scheme == "" {
		real, err := s.localAdapter(loc)
		if err != nil {
			return "", nil, err
		}
		return real, func() {}, nil
	}
	if herr := s.checkRoot(loc, loraPath); herr != nil {
		return "", nil, herr
	}
	if s.o.FetchAdapter == nil {
		return "", nil, badRequest("lora_path %s: this server reads local folders only", excerpt.Name(loraPath))
	}
	tmp, err := os.MkdirTemp("", "drmas-adapter-*")
	if err != nil {
		return "", nil, &httpError{http.StatusInternalServerError, "InternalServerError", "a folder for the adapter's files: " + err.Error()}
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	if err := s.o.FetchAdapter(ctx, loc.String(), tmp); err != nil {
		cleanup()
		return "", nil, notFound(errors.New(hideDir(err.Error(), tmp, loraPath)))
	}
	return tmp, cleanup, nil
}

// localAdapter resolves a local lora_path's symlinks and checks that it, and the adapter files
// in it, are under AdapterRoot.
func (s *Server) localAdapter(loc location) (string, *httpError) {
	real, err := filepath.EvalSymlinks(loc.path)
	if err != nil {
		return "", &httpError{http.StatusNotFound, "NotFoundError", fmt.Sprintf("No adapter found for %s: %v", excerpt.Name(loc.path), errors.Unwrap(err))}
	}
	if herr := s.checkRoot(location{path: real}, loc.path); herr != nil {
		return "", herr
	}
	for _, f := range []string{hf.AdapterConfigFile, hf.AdapterWeightsFile} {
		if target, err := filepath.EvalSymlinks(filepath.Join(real, f)); err == nil {
			if herr := s.checkRoot(location{path: target}, loc.path); herr != nil {
				return "", herr
			}
		}
	}
	return real, nil
}

// checkRoot refuses a location outside AdapterRoot.
func (s *Server) checkRoot(loc location, loraPath string) *httpError {
	if s.o.AdapterRoot == "" {
		return nil
	}
	root, err := parseLocation(s.o.AdapterRoot)
	if err == nil && root.scheme == "" {
		if r, err := filepath.EvalSymlinks(root.path); err == nil {
			root.path = r
		}
	}
	if err != nil || !loc.under(root, s.o.AdapterCheckpoints) {
		where := "under " + excerpt.Name(s.o.AdapterRoot)
		if s.o.AdapterCheckpoints {
			where = "a run's checkpoint folder under " + excerpt.Name(s.o.AdapterRoot) + " (runs/<run>/checkpoints/…)"
		}
		return &httpError{http.StatusForbidden, "PermissionDeniedError", fmt.Sprintf("lora_path %s: this server loads adapters only from %s (--adapter-root)", excerpt.Name(loraPath), where)}
	}
	return nil
}

// hideDir replaces the temporary folder in a message by the lora_path it stands for.
func hideDir(msg, dir, loraPath string) string {
	return strings.ReplaceAll(msg, dir, excerpt.Name(loraPath))
}
