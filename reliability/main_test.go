package reliability_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// run is the run name of every test here.
const run = "t"

const tinyConfig = stagetest.TinyConfigYAML

var (
	workDir  string // removed when the tests end
	drmasBin string // built once; "" if the build failed (buildErr says why)
	buildErr error
	cfgPath  string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "drmas-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	workDir = dir
	cfgPath = filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(cfgPath, []byte(tinyConfig), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var buildOnce sync.Once

// binary builds cmd/drmas once per test binary and returns its path.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		bin := filepath.Join(workDir, "drmas")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/drmas-dev/drmas/cmd/drmas")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build drmas: %v\n%s", err, out)
			return
		}
		drmasBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return drmasBin
}

// drmas returns a command running the binary with the tiny config on store.
func drmas(t testing.TB, store string, args ...string) *exec.Cmd {
	t.Helper()
	full := append([]string{"--config", cfgPath, "--store", store, "-q"}, args...)
	cmd := exec.Command(binary(t), full...)
	cmd.Env = cleanEnv()
	return cmd
}

// cleanEnv is the environment without DRMAS_* and AWS_* settings of the caller.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DRMAS_") || strings.HasPrefix(kv, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func openDir(t testing.TB, dir string) storage.Bucket {
	t.Helper()
	b, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// state is what a store holds under a prefix, checked for consistency.
type state struct {
	// Committed maps every manifest, every file a manifest lists and LATEST to its sha256.
	Committed map[string]string
	// Leftovers are objects in folders without a manifest: partial outputs of an interrupted
	// stage, which readers ignore (commit.Read says ErrNotCommitted).
	Leftovers []string
}

// inspect lists every object under prefix and checks that the store is consistent: every
// committed folder verifies deeply, every object is either committed (a manifest, a file a
// manifest lists, LATEST) or lies in a folder no manifest covers, and LATEST, if present,
// names a step that loads. It fails the test otherwise.
func inspect(t testing.TB, b storage.Bucket, prefix string) state {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []string
	if err := b.Iter(ctx, prefix, func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatalf("list %s: %v", b.Name(), err)
	}
	listed := map[string]bool{}
	var dirs []string
	for _, k := range keys {
		listed[k] = true
		if path.Base(k) == commit.ManifestName {
			dirs = append(dirs, path.Dir(k))
		}
	}
	st := state{Committed: map[string]string{}}
	covered := map[string]string{} // key -> the committed folder that lists it
	for _, dir := range dirs {
		m, msha, err := commit.Read(ctx, b, dir)
		if err != nil {
			t.Fatalf("committed folder %s does not read: %v", dir, err)
		}
		if err := commit.Verify(ctx, b, dir, m, true); err != nil {
			t.Fatalf("torn committed folder: %v", err)
		}
		st.Committed[path.Join(dir, commit.ManifestName)] = msha
		for _, f := range m.Files {
			k := path.Join(dir, f.Name)
			st.Committed[k] = f.SHA256
			covered[k] = dir
		}
	}
	for _, k := range keys {
		if _, ok := st.Committed[k]; ok {
			continue
		}
		if path.Base(k) == "LATEST" {
			data, err := storage.ReadAll(ctx, b, k)
			if err != nil {
				t.Fatal(err)
			}
			st.Committed[k] = sha(data)
			continue
		}
		// Not listed by any manifest: it must not lie inside a committed folder (that would
		// be an unlisted file in a committed output), and its own folder must read as not
		// committed.
		// The one exception: receipts of a folder whose finalizer was killed between writing
		// the manifest and removing them (commit.Finalize: harmless, readers never list them,
		// and the next Finalize removes them). They count as leftovers, which must be gone
		// after a rerun.
		if path.Base(path.Dir(k)) == commit.ReceiptsDir && slices.Contains(dirs, path.Dir(path.Dir(k))) {
			st.Leftovers = append(st.Leftovers, k)
			continue
		}
		for _, dir := range dirs {
			if strings.HasPrefix(k, dir+"/") {
				t.Fatalf("%s lies in committed folder %s but its manifest does not list it", k, dir)
			}
		}
		if _, _, err := commit.Read(ctx, b, path.Dir(k)); !errors.Is(err, commit.ErrNotCommitted) {
			t.Fatalf("leftover %s: its folder should read as not committed, got %v", k, err)
		}
		st.Leftovers = append(st.Leftovers, k)
	}
	checkLatest(t, b)
	return st
}

// checkLatest asserts that LATEST, when present, names a committed step that loads and verifies.
func checkLatest(t testing.TB, b storage.Bucket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	step, err := checkpoints.ReadLatest(ctx, b, run)
	if errors.Is(err, checkpoints.ErrNone) {
		return
	}
	if err != nil {
		t.Fatalf("LATEST: %v", err)
	}
	if _, err := checkpoints.LoadStep(ctx, b, run, step, true); err != nil {
		t.Fatalf("LATEST names step %d, which does not load: %v", step, err)
	}
}

// diff describes how two committed states differ, or returns "".
func diff(got, want map[string]string) string {
	var lines []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			lines = append(lines, "missing "+k)
		} else if g != w {
			lines = append(lines, fmt.Sprintf("differs %s: %.12s, want %.12s", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, "extra "+k)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// only keeps the entries of m under one of the prefixes.
func only(m map[string]string, prefixes ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
				break
			}
		}
	}
	return out
}

// copyDir copies a folder store (a prepared state) to a fresh folder.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// lockedWriter collects a subprocess's output.
type lockedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

var _ io.Writer = (*lockedWriter)(nil)
