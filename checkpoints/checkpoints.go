// Package checkpoints publishes and loads the policy's checkpoints in a run's store
// (docs/design.md, "Learner" and "Hugging Face models in the pipeline").
//
// A checkpoint step holds, per built-in model, model.safetensors and optim.safetensors under
// checkpoints/step=NNNNNN/<model>/; per Hugging Face model, a model folder a server loads as it
// is under the same name and its optimizer state under _optim/ (hf.go); and one _MANIFEST.json for all models of the step (files,
// sizes, sha256, step, parent step, config digest and, for a step the learner published, the
// inputs it was trained on) written last: a step is visible only once complete. LATEST names
// the newest complete step and is written after the manifest; it never moves backwards.
// Readers verify sizes and hashes and fall back to the previous complete step with a warning
// when the newest is damaged. Retention never deletes the step LATEST names, nor step 0.
package checkpoints

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage"
)

// ErrNone says a run has no complete checkpoint.
var ErrNone = errors.New("no checkpoint")

// NoParent is the Parent of a checkpoint trained from scratch (the warm-up's step 0).
const NoParent = -1

// Set is the models (and optimizer states) of one checkpoint step.
type Set struct {
	Step   int64
	Parent int64
	Models map[string]*model.Model
	// HF are the Hugging Face models (models.<id>.hf), by name; nil when there are none.
	HF     map[string]*HFModel
	Optims map[string]*model.AdamW // entries may be missing (no optimizer state yet)
	// Inputs are the committed folders the step was trained on (the learner's: the iteration's
	// rollout and advantage folders), recorded in its manifest by Publish and returned by Load.
	// Empty for the warm-up's step 0 and for steps published by a drmas that did not record
	// them; such steps load as any other.
	Inputs []commit.Input
	// ManifestSHA256 is set by Load: the digest of the step's manifest.
	ManifestSHA256 string
}

// ModelNames returns the set's models, built-in and Hugging Face, sorted.
func (s *Set) ModelNames() []string {
	names := make([]string, 0, len(s.Models)+len(s.HF))
	for n := range s.Models {
		names = append(names, n)
	}
	for n := range s.HF {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Trainable returns model name, built-in or Hugging Face, as the learner trains it.
func (s *Set) Trainable(name string) (model.Trainable, bool) {
	if h, ok := s.HF[name]; ok && h != nil && h.Model != nil {
		return h.Model, true
	}
	m, ok := s.Models[name]
	return m, ok && m != nil
}

// hf returns s.HF, made when nil.
func (s *Set) hf() map[string]*HFModel {
	if s.HF == nil {
		s.HF = map[string]*HFModel{}
	}
	return s.HF
}

// file is one file of a step, named relative to the step's folder: its bytes, or a local file
// staged on disk (a Hugging Face model's, as large as its weights), read when it is uploaded.
type file struct {
	name  string
	data  []byte
	local string
	bytes int64
	sha   string
}

func memFile(name string, data []byte) file {
	return file{name: name, data: data, bytes: int64(len(data)), sha: commit.Digest(data)}
}

// put uploads the file into dir: its bytes, or the staged local file streamed (a model's
// weights and optimizer state are never read into memory whole).
func (f file) put(ctx context.Context, b storage.Bucket, dir string) (commit.File, error) {
	if f.local == "" {
		return commit.PutFile(ctx, b, dir, f.name, f.data, 0)
	}
	pf, err := commit.PutLocalFile(ctx, b, dir, f.name, f.local, 0)
	if err == nil && (pf.Bytes != f.bytes || pf.SHA256 != f.sha) {
		err = fmt.Errorf("staged %s changed on disk since it was written", f.local)
	}
	return pf, err
}

// files encodes the step's files: per built-in model, model.safetensors and optim.safetensors
// in its folder; per Hugging Face model, its folder and its optimizer under OptimDir (hfFiles),
// staged in a temporary folder that cleanup removes. params records the Hugging Face models'
// bases.
func (s *Set) files() (out []file, params map[string]string, cleanup func(), err error) {
	cleanup = func() {}
	if len(s.HF) > 0 {
		tmp, err := os.MkdirTemp("", "drmas-publish-*")
		if err != nil {
			return nil, nil, nil, fmt.Errorf("stage checkpoint files: %w", err)
		}
		cleanup = func() { _ = os.RemoveAll(tmp) }
		defer func() {
			if err != nil {
				cleanup()
			}
		}()
		params = map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(s.HF)) {
			if name == OptimDir {
				return nil, nil, nil, fmt.Errorf("model %s: the name of a step's optimizer folder cannot name a model", name)
			}
			hfs, err := hfFiles(name, s.HF[name], s.Optims[name], filepath.Join(tmp, name))
			if err != nil {
				return nil, nil, nil, err
			}
			out = append(out, hfs...)
			maps.Copy(params, hfParams(name, s.HF[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Models)) {
		if s.HF[name] != nil {
			return nil, nil, nil, fmt.Errorf("model %s is both a built-in and a Hugging Face model", name)
		}
		var buf bytes.Buffer
		if err := s.Models[name].SaveSafetensors(&buf); err != nil {
			return nil, nil, nil, fmt.Errorf("encode model %s: %w", name, err)
		}
		out = append(out, memFile(name+"/model.safetensors", buf.Bytes()))
		if o := s.Optims[name]; o != nil {
			var buf bytes.Buffer
			if err := o.SaveSafetensors(&buf); err != nil {
				return nil, nil, nil, fmt.Errorf("encode optimizer %s: %w", name, err)
			}
			out = append(out, memFile(name+"/optim.safetensors", buf.Bytes()))
		}
	}
	return out, params, cleanup, nil
}

// Publish writes s as step s.Step of run, commits it, and points LATEST at it. Publishing a
// step that is already committed with an identical manifest (the same files, parent, config
// digest and inputs) is a no-op (a rerun); with another one it is a conflict, and nothing of
// the committed step is touched.
func Publish(ctx context.Context, b storage.Bucket, run string, s *Set, configDigest string) (string, error) {
	dir := layout.CheckpointDir(run, s.Step)
	out, params, cleanup, err := s.files()
	if err != nil {
		return "", err
	}
	defer cleanup()
	step, parent := s.Step, s.Parent
	m := &commit.Manifest{Kind: "checkpoint", SchemaVersion: 1, Run: run, Step: &step, ConfigDigest: configDigest,
		Inputs: append([]commit.Input(nil), s.Inputs...), Params: params}
	if parent >= 0 {
		m.Parent = &parent
	}
	for _, f := range out {
		m.Files = append(m.Files, commit.File{Name: f.name, Bytes: f.bytes, SHA256: f.sha})
	}
	want, err := commit.Encode(m)
	if err != nil {
		return "", err
	}
	if old, sha, err := commit.Read(ctx, b, dir); err == nil {
		have, err := commit.Encode(old)
		if err != nil {
			return "", err
		}
		if !bytes.Equal(have, want) {
			return "", fmt.Errorf("publish checkpoint step %d: already committed with different content: %w", s.Step, commit.ErrConflict)
		}
		return sha, SetLatest(ctx, b, run, s.Step)
	} else if !errors.Is(err, commit.ErrNotCommitted) {
		return "", err
	}
	for _, f := range out {
		pf, err := f.put(ctx, b, dir)
		if err != nil {
			return "", withdrawn(ctx, b, run, err)
		}
		// The returned entry carries the upload's ETag, which spares Commit reading it back
		// (Encode sorted m.Files by name).
		m.Files[slices.IndexFunc(m.Files, func(e commit.File) bool { return e.Name == f.name })] = pf
	}
	sha, err := commit.Commit(ctx, b, dir, m)
	if err != nil {
		return "", withdrawn(ctx, b, run, err)
	}
	if err := SetLatest(ctx, b, run, s.Step); err != nil {
		// SetLatest moves LATEST back itself when it sees the step withdrawn after its write.
		// A step gone by the time of another of its errors (committed a moment ago) was
		// withdrawn too: say so, and make sure LATEST does not name it.
		if ok, cerr := commit.IsCommitted(ctx, b, dir); cerr == nil && !ok && !errors.Is(err, commit.ErrWithdrawn) {
			err = withdrawn(ctx, b, run, fmt.Errorf("publish checkpoint step %d: its commit was withdrawn right after it (a concurrent publisher of other weights replaced one of its files): %w: %w", s.Step, commit.ErrWithdrawn, commit.ErrConflict))
		}
		return "", err
	}
	return sha, nil
}

// withdrawn repairs LATEST after err, if err says a step's commit was withdrawn (a concurrent
// publisher of other weights replaced one of its files, see commit.ErrWithdrawn): LATEST may
// name that step, whose writer pointed it there before the withdrawal. It returns err.
func withdrawn(ctx context.Context, b storage.Bucket, run string, err error) error {
	if !errors.Is(err, commit.ErrWithdrawn) {
		return err
	}
	if rerr := repairLatest(ctx, b, run); rerr != nil {
		return fmt.Errorf("%w (and repairing LATEST failed: %v)", err, rerr)
	}
	return err
}

// repairLatest points LATEST at the newest committed step (or removes it, if none is) when it
// names a step that is not committed: one whose commit was withdrawn after its publisher
// pointed LATEST at it. Like SetLatest, it re-lists after its write, so a step committed
// meanwhile is not hidden.
func repairLatest(ctx context.Context, b storage.Bucket, run string) error {
	cur, err := ReadLatest(ctx, b, run)
	if errors.Is(err, ErrNone) {
		return nil
	}
	if err == nil {
		ok, err := commit.IsCommitted(ctx, b, layout.CheckpointDir(run, cur))
		if err != nil || ok {
			return err
		}
	}
	wrote := int64(-1)
	for attempt := 0; attempt < 8; attempt++ {
		steps, err := Steps(ctx, b, run)
		if err != nil {
			return err
		}
		newest := int64(-1)
		if len(steps) > 0 {
			newest = steps[len(steps)-1]
		}
		if attempt > 0 && newest == wrote {
			return nil
		}
		if newest < 0 {
			err = b.Delete(ctx, layout.LatestKey(run))
		} else {
			err = storage.PutBytes(ctx, b, layout.LatestKey(run), latestBody(newest))
		}
		if err != nil {
			return fmt.Errorf("repair LATEST: %w", err)
		}
		wrote = newest
	}
	return fmt.Errorf("repair LATEST: committed steps kept changing")
}

func latestBody(step int64) []byte { return fmt.Appendf(nil, "step=%06d\n", step) }

// ReadLatest returns the step LATEST names, or an error matching ErrNone if there is none.
func ReadLatest(ctx context.Context, b storage.Bucket, run string) (int64, error) {
	data, err := storage.ReadAll(ctx, b, layout.LatestKey(run))
	if storage.IsNotFound(err) {
		return 0, fmt.Errorf("run %s: %w", run, ErrNone)
	}
	if err != nil {
		return 0, fmt.Errorf("read LATEST: %w", err)
	}
	step, ok := layout.ParseStepDir(strings.TrimSpace(string(data)))
	if !ok {
		return 0, fmt.Errorf("%s: %q does not name a step", layout.LatestKey(run), data)
	}
	return step, nil
}

// SetLatest points LATEST at step, which must be committed. LATEST never moves backwards: if
// it already names a later step, SetLatest leaves it.
//
// The store has no compare-and-swap, so two writers publishing different steps could each read
// LATEST before the other writes and the lower one write last. SetLatest closes that window by
// re-listing the committed steps after its write: if a later step is committed than the one it
// wrote, it writes again. Every writer re-checks after its own write, and a step is committed
// before its writer's LATEST write, so the last write to settle names the newest step.
func SetLatest(ctx context.Context, b storage.Bucket, run string, step int64) error {
	ok, err := commit.IsCommitted(ctx, b, layout.CheckpointDir(run, step))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("set LATEST to step %d: the step is not committed", step)
	}
	target := step
	for attempt := 0; attempt < 8; attempt++ {
		cur, err := ReadLatest(ctx, b, run)
		if err == nil && cur >= target {
			return nil
		}
		if err != nil && !errors.Is(err, ErrNone) && ctx.Err() != nil {
			return err
		}
		// A damaged or missing LATEST is replaced: the manifests are the source of truth.
		if err := storage.PutBytes(ctx, b, layout.LatestKey(run), latestBody(target)); err != nil {
			return fmt.Errorf("update LATEST: %w", err)
		}
		steps, err := Steps(ctx, b, run)
		if err != nil {
			return err
		}
		if len(steps) == 0 || steps[len(steps)-1] <= target {
			if !slices.Contains(steps, target) {
				// Withdrawn since the check above (a concurrent publisher of other weights
				// replaced one of its files): LATEST must not name it.
				if err := repairLatest(ctx, b, run); err != nil {
					return err
				}
				return fmt.Errorf("set LATEST to step %d: the step's commit was withdrawn meanwhile: %w: %w", target, commit.ErrWithdrawn, commit.ErrConflict)
			}
			return nil
		}
		target = steps[len(steps)-1]
	}
	return fmt.Errorf("update LATEST: committed steps kept changing")
}

// FormatSteps lists steps for messages, runs of consecutive steps as ranges: "0..3, 5", or
// "none".
func FormatSteps(steps []int64) string {
	if len(steps) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.FormatInt(steps[i], 10))
		case j == i+1:
			parts = append(parts, strconv.FormatInt(steps[i], 10), strconv.FormatInt(steps[j], 10))
		default:
			parts = append(parts, fmt.Sprintf("%d..%d", steps[i], steps[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// Steps lists the committed steps of run in increasing order. Only folders named as
// CheckpointDir names them count: a manifest under another spelling of a step ("step=5",
// "step=+5" next to "step=000005") is not a checkpoint LoadStep or Retain would find.
func Steps(ctx context.Context, b storage.Bucket, run string) ([]int64, error) {
	var steps []int64
	err := iterStepKeys(ctx, b, run, func(step int64, file, _ string) {
		if file == commit.ManifestName {
			steps = append(steps, step)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", run, err)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	return steps, nil
}

// iterStepKeys calls f for every key under run's checkpoint folders that CheckpointDir spells
// (not "step=5" or "step=+5" beside "step=000005"), with its step and its name in the folder.
func iterStepKeys(ctx context.Context, b storage.Bucket, run string, f func(step int64, file, key string)) error {
	prefix := layout.CheckpointsDir(run) + "/"
	return b.Iter(ctx, prefix, func(key string) error {
		el, file, ok := strings.Cut(strings.TrimPrefix(key, prefix), "/")
		if s, isStep := layout.ParseStepDir(el); ok && isStep && prefix+el == layout.CheckpointDir(run, s) {
			f(s, file, key)
		}
		return nil
	})
}

// LoadStep loads and verifies one committed step. withOptim also loads optimizer states.
func LoadStep(ctx context.Context, b storage.Bucket, run string, step int64, withOptim bool) (*Set, error) {
	dir := layout.CheckpointDir(run, step)
	m, sha, err := commit.Read(ctx, b, dir)
	if errors.Is(err, commit.ErrNotCommitted) {
		if steps, lerr := Steps(ctx, b, run); lerr == nil {
			return nil, fmt.Errorf("checkpoint step %d of run %s: %w (committed steps: %s)", step, run, err, FormatSteps(steps))
		}
	}
	if err != nil {
		return nil, err
	}
	if m.Kind != "checkpoint" || m.Step == nil || *m.Step != step {
		return nil, fmt.Errorf("%s: manifest is not the checkpoint of step %d", dir, step)
	}
	s := &Set{Step: step, Parent: NoParent, Models: map[string]*model.Model{}, Optims: map[string]*model.AdamW{},
		Inputs: m.Inputs, ManifestSHA256: sha}
	if m.Parent != nil {
		s.Parent = *m.Parent
	}
	hfs := hfEntries(m)
	for _, f := range m.Files {
		name, file, ok := strings.Cut(f.Name, "/")
		if !ok || file != "model.safetensors" || hfs[name] != nil {
			continue
		}
		data, err := commit.ReadFile(ctx, b, dir, f)
		if err != nil {
			return nil, err
		}
		mdl, err := model.LoadModel(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, f.Name), err)
		}
		s.Models[name] = mdl
	}
	if err := loadHFStep(ctx, b, run, dir, m, s, withOptim); err != nil {
		return nil, err
	}
	if len(s.Models)+len(s.HF) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, errNoModel)
	}
	if withOptim {
		for _, f := range m.Files {
			name, file, ok := strings.Cut(f.Name, "/")
			if !ok || file != "optim.safetensors" || s.Models[name] == nil {
				continue
			}
			data, err := commit.ReadFile(ctx, b, dir, f)
			if err != nil {
				return nil, err
			}
			o, err := model.LoadAdamW(s.Models[name], bytes.NewReader(data), int64(len(data)))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path.Join(dir, f.Name), err)
			}
			s.Optims[name] = o
		}
	}
	return s, nil
}

// Load loads the step LATEST names; if it is damaged or missing, it warns and falls back to the
// newest complete step that verifies. It returns an error matching ErrNone if no step loads.
func Load(ctx context.Context, b storage.Bucket, run string, withOptim bool, warn func(string)) (*Set, error) {
	if warn == nil {
		warn = func(string) {}
	}
	latest, err := ReadLatest(ctx, b, run)
	if err != nil && !errors.Is(err, ErrNone) {
		if unavailable(err) {
			return nil, err
		}
		warn(err.Error())
	}
	steps, lerr := Steps(ctx, b, run)
	if lerr != nil {
		return nil, lerr
	}
	if err == nil {
		s, lerr := LoadStep(ctx, b, run, latest, withOptim)
		if lerr == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if unavailable(lerr) {
			return nil, lerr
		}
		warn(fmt.Sprintf("checkpoint step %d (LATEST) is unusable, falling back: %v", latest, lerr))
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if err == nil && steps[i] >= latest {
			continue
		}
		s, lerr := LoadStep(ctx, b, run, steps[i], withOptim)
		if lerr == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if unavailable(lerr) {
			return nil, lerr
		}
		warn(fmt.Sprintf("checkpoint step %d is unusable, falling back: %v", steps[i], lerr))
	}
	return nil, fmt.Errorf("run %s: %w (run `drmas run-stage warmup` first)", run, ErrNone)
}

// unavailable reports whether err says the store could not be read (a transport or server
// failure) rather than that a step is missing or damaged. Load returns such errors instead of
// falling back: an older step would silently be used as the policy while the store hiccups,
// and once no step loads the failure would read as "no checkpoint".
func unavailable(err error) bool {
	var ke *storage.KeyError
	var ne net.Error
	switch {
	case storage.IsNotFound(err) || errors.Is(err, commit.ErrNotCommitted):
		return false
	case errors.As(err, &ke), errors.As(err, &ne):
		return true
	}
	return false
}

// Retain deletes committed steps older than the newest keep, never the one LATEST names, never
// step 0 (the warm-up checkpoint: the KL reference and the start of every ablation) and never a
// step N whose iteration N has no committed learn: that learn needs it (the policy that
// generated its rollout), and a rerun of an earlier, committed iteration must not take it away
// from a later one that published N+1 and died before committing. A step's manifest is deleted
// first, so a crash mid-delete leaves an uncommitted folder that readers ignore, never a
// committed one with missing files; Retain also deletes such leftover uncommitted folders when
// they are older than the oldest step it keeps, under the same rules. It returns the committed
// steps it deleted.
func Retain(ctx context.Context, b storage.Bucket, run string, keep int) ([]int64, error) {
	if keep < 1 {
		keep = 1
	}
	files := map[int64][]string{} // step → its keys
	var steps []int64             // the committed ones
	err := iterStepKeys(ctx, b, run, func(step int64, file, key string) {
		files[step] = append(files[step], key)
		if file == commit.ManifestName {
			steps = append(steps, step)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("retain: list checkpoints of %s: %w", run, err)
	}
	slices.Sort(steps)
	committed := func(s int64) bool { _, ok := slices.BinarySearch(steps, s); return ok }
	if len(steps) == 0 {
		return nil, nil
	}
	oldestKept := steps[max(len(steps)-keep, 0)]
	latest, lerr := ReadLatest(ctx, b, run)
	var deleted []int64
	for _, s := range slices.Sorted(maps.Keys(files)) {
		if s == 0 || s >= oldestKept || (lerr == nil && s == latest) {
			continue
		}
		if learned, err := commit.IsCommitted(ctx, b, layout.LearnDir(run, int(s))); err != nil {
			return deleted, fmt.Errorf("retain: %w", err)
		} else if !learned {
			continue // iteration s's learn may still need it
		}
		dir := layout.CheckpointDir(run, s)
		if committed(s) {
			if err := b.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
				return deleted, fmt.Errorf("retain: %w", err)
			}
		}
		for _, k := range files[s] {
			if k == path.Join(dir, commit.ManifestName) {
				continue
			}
			if err := b.Delete(ctx, k); err != nil {
				return deleted, fmt.Errorf("retain: %w", err)
			}
		}
		if committed(s) {
			deleted = append(deleted, s)
		}
	}
	return deleted, nil
}

// FormatStep renders a step like LATEST does ("step=000008").
func FormatStep(step int64) string { return "step=" + fmt.Sprintf("%06d", step) }
