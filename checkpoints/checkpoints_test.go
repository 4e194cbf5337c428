package checkpoints_test

import (
	"context"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/storage/storetest"
)

func newSet(t testing.TB, step int64, seed uint64) *checkpoints.Set {
	t.Helper()
	cfg := model.DefaultConfig()
	cfg.Dim, cfg.Layers, cfg.Heads, cfg.Context, cfg.FFMult = 8, 1, 2, 16, 2
	m, err := model.New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return &checkpoints.Set{Step: step, Parent: step - 1, Models: map[string]*model.Model{"m1": m},
		Optims: map[string]*model.AdamW{"m1": model.NewAdamW(m, model.DefaultAdamWConfig())}}
}

func store(t testing.TB) storage.Bucket {
	t.Helper()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPublishLoadAndLatest(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	if _, err := checkpoints.Load(ctx, b, "r", false, nil); err == nil {
		t.Fatal("loaded from an empty run")
	}
	for step := int64(0); step < 3; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, uint64(step)), "digest"); err != nil {
			t.Fatal(err)
		}
		if got, err := checkpoints.ReadLatest(ctx, b, "r"); err != nil || got != step {
			t.Fatalf("LATEST %d %v after publishing %d", got, err, step)
		}
	}
	// Republishing identical bytes is a no-op; different bytes for a committed step conflict.
	if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, 2, 2), "digest"); err != nil {
		t.Fatalf("identical republish: %v", err)
	}
	if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, 2, 99), "digest"); err == nil {
		t.Fatal("a different checkpoint for a committed step was accepted")
	}
	// LATEST never moves backwards.
	if err := checkpoints.SetLatest(ctx, b, "r", 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoints.ReadLatest(ctx, b, "r"); got != 2 {
		t.Fatalf("LATEST moved back to %d", got)
	}
	if err := checkpoints.SetLatest(ctx, b, "r", 7); err == nil {
		t.Fatal("LATEST pointed at an uncommitted step")
	}
	s, err := checkpoints.Load(ctx, b, "r", true, nil)
	if err != nil || s.Step != 2 || s.Parent != 1 || s.Optims["m1"] == nil {
		t.Fatalf("load: %+v %v", s, err)
	}
	want := newSet(t, 2, 2).Models["m1"].Params()
	for i, p := range s.Models["m1"].Params() {
		for j := range p.Data {
			if p.Data[j] != want[i].Data[j] {
				t.Fatalf("param %s differs after load", p.Name)
			}
		}
	}
}

func TestLoadFallsBackFromDamagedLatest(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 3; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, uint64(step)), ""); err != nil {
			t.Fatal(err)
		}
	}
	// Damage step 2's weights (same size, different bytes).
	key := path.Join(layout.CheckpointDir("r", 2), "m1/model.safetensors")
	data, err := storage.ReadAll(ctx, b, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := storage.PutBytes(ctx, b, key, data); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	s, err := checkpoints.Load(ctx, b, "r", false, func(w string) { warnings = append(warnings, w) })
	if err != nil {
		t.Fatal(err)
	}
	if s.Step != 1 || len(warnings) != 1 || !strings.Contains(warnings[0], "step 2") {
		t.Fatalf("loaded step %d with warnings %q; want a fallback to step 1 with one warning about step 2", s.Step, warnings)
	}
	// A step whose manifest is missing is invisible, whatever files it has.
	if err := b.Delete(ctx, path.Join(layout.CheckpointDir("r", 1), commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if steps, _ := checkpoints.Steps(ctx, b, "r"); len(steps) != 2 || steps[0] != 0 || steps[1] != 2 {
		t.Fatalf("steps %v", steps)
	}
	if s, err := checkpoints.Load(ctx, b, "r", false, nil); err != nil || s.Step != 0 {
		t.Fatalf("want fallback to step 0, got %+v %v", s, err)
	}
}

// learned commits a learn manifest for each iteration of run, as learn does once an iteration
// is trained (Retain keeps step N until iteration N's learn is committed).
func learned(t *testing.T, b storage.Bucket, run string, iters ...int) {
	t.Helper()
	for _, it := range iters {
		step := int64(it + 1)
		m := &commit.Manifest{Kind: "learn", SchemaVersion: 1, Run: run, Iteration: &it, Step: &step}
		if _, err := commit.Commit(context.Background(), b, layout.LearnDir(run, it), m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetain(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 6; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, 1), ""); err != nil {
			t.Fatal(err)
		}
	}
	// Iterations 0, 1 and 3 are learned; iteration 2's learn published step 3 and died, so a
	// rerun of it needs step 2: kept, whatever keep says.
	learned(t, b, "r", 0, 1, 3)
	deleted, err := checkpoints.Retain(ctx, b, "r", 2)
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := checkpoints.Steps(ctx, b, "r")
	if !slices.Equal(deleted, []int64{1, 3}) || !slices.Equal(steps, []int64{0, 2, 4, 5}) {
		t.Fatalf("deleted %v, left %v; want step 0 (warm-up), step 2 (iteration 2 not learned) and the last 2 kept", deleted, steps)
	}
	learned(t, b, "r", 2)
	if deleted, err := checkpoints.Retain(ctx, b, "r", 2); err != nil || !slices.Equal(deleted, []int64{2}) {
		t.Fatalf("once iteration 2 is learned: deleted %v %v, want [2]", deleted, err)
	}
	var left []string
	_ = b.Iter(ctx, layout.CheckpointDir("r", 2)+"/", func(k string) error { left = append(left, k); return nil })
	if len(left) != 0 {
		t.Fatalf("files of deleted step 2 left: %v", left)
	}
	// LATEST is never deleted, even when older than keep allows.
	b2 := store(t)
	for step := int64(0); step < 3; step++ {
		if _, err := checkpoints.Publish(ctx, b2, "r", newSet(t, step, 1), ""); err != nil {
			t.Fatal(err)
		}
	}
	learned(t, b2, "r", 0, 1)
	// (SetLatest would settle on the newest step: write an older LATEST by hand.)
	if err := storage.PutBytes(ctx, b2, layout.LatestKey("r"), []byte("step=000001\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoints.Retain(ctx, b2, "r", 1); err != nil {
		t.Fatal(err)
	}
	if steps, _ := checkpoints.Steps(ctx, b2, "r"); len(steps) != 3 {
		t.Fatalf("retention deleted LATEST or step 0: left %v", steps)
	}
}

// TestRetainRemovesLeftoversOfAnInterruptedDelete: a delete killed after a step's manifest
// went leaves an uncommitted folder; the next Retain removes it when it is older than the
// oldest step kept, and leaves an uncommitted folder newer than that (a step being published).
func TestRetainRemovesLeftoversOfAnInterruptedDelete(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 4; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, 1), ""); err != nil {
			t.Fatal(err)
		}
	}
	learned(t, b, "r", 0, 1, 2)
	// Step 1's delete was killed after its manifest; step 5 is being published.
	if err := b.Delete(ctx, path.Join(layout.CheckpointDir("r", 1), commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	inflight := path.Join(layout.CheckpointDir("r", 5), "m1", "model.safetensors")
	if err := storage.PutBytes(ctx, b, inflight, []byte("partial")); err != nil {
		t.Fatal(err)
	}
	deleted, err := checkpoints.Retain(ctx, b, "r", 2)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("deleted %v %v; want no committed step deleted (keep 2 of 0, 2, 3)", deleted, err)
	}
	var left []string
	_ = b.Iter(ctx, layout.CheckpointsDir("r")+"/", func(k string) error {
		if strings.Contains(k, "/step=000001/") || k == inflight {
			left = append(left, k)
		}
		return nil
	})
	if len(left) != 1 || left[0] != inflight {
		t.Fatalf("left %v; want only the in-flight step 5 file", left)
	}
	if steps, _ := checkpoints.Steps(ctx, b, "r"); !slices.Equal(steps, []int64{0, 2, 3}) {
		t.Fatalf("steps %v, want [0 2 3]", steps)
	}
}

// TestSetLatestRaceSettlesOnNewest: writers publishing different steps at once leave LATEST at
// the newest committed step, whatever the interleaving.
func TestSetLatestRaceSettlesOnNewest(t *testing.T) {
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		b := store(t)
		for step := int64(0); step < 4; step++ {
			s := newSet(t, step, 1)
			// Commit without moving LATEST, to race the pointer updates alone.
			if _, err := checkpoints.Publish(ctx, b, "r", s, ""); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Delete(ctx, layout.LatestKey("r")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 4)
		for step := int64(0); step < 4; step++ {
			go func() { done <- checkpoints.SetLatest(ctx, b, "r", step) }()
		}
		for i := 0; i < 4; i++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if got, err := checkpoints.ReadLatest(ctx, b, "r"); err != nil || got != 3 {
			t.Fatalf("round %d: LATEST %d %v, want 3", round, got, err)
		}
	}
}

// TestStepsIgnoresOtherSpellings: a manifest in a folder that spells a step otherwise than
// CheckpointDir ("step=1", "step=+2": a copy by hand) is not a step. It used to be listed
// beside the real one, so Steps named step 1 twice, Retain "deleted" it twice (the stray folder
// stayed), and Load could try a step whose folder it then did not find.
func TestStepsIgnoresOtherSpellings(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 3; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, 1), ""); err != nil {
			t.Fatal(err)
		}
	}
	data, err := storage.ReadAll(ctx, b, path.Join(layout.CheckpointDir("r", 1), commit.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, el := range []string{"step=1", "step=+2", "step=0000001"} {
		if err := storage.PutBytes(ctx, b, path.Join(layout.CheckpointsDir("r"), el, commit.ManifestName), data); err != nil {
			t.Fatal(err)
		}
	}
	steps, err := checkpoints.Steps(ctx, b, "r")
	if err != nil || len(steps) != 3 || steps[0] != 0 || steps[1] != 1 || steps[2] != 2 {
		t.Fatalf("steps %v %v; want [0 1 2]", steps, err)
	}
	learned(t, b, "r", 0, 1)
	if deleted, err := checkpoints.Retain(ctx, b, "r", 1); err != nil || len(deleted) != 1 || deleted[0] != 1 {
		t.Fatalf("retain deleted %v %v; want [1]", deleted, err)
	}
}

// TestPublishRecordsInputs: a step records what it was trained on, Load returns it, and the
// same weights published for other inputs are a conflict (another iteration's update, however
// alike its bytes). A step without inputs (the warm-up, or one published by a drmas that did
// not record them: its manifest has no "inputs" key) loads as before.
func TestPublishRecordsInputs(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, 0, 1), "d"); err != nil {
		t.Fatal(err)
	}
	data, err := storage.ReadAll(ctx, b, path.Join(layout.CheckpointDir("r", 0), commit.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "inputs") {
		t.Fatalf("a step without inputs writes an inputs key:\n%s", data)
	}
	if s, err := checkpoints.LoadStep(ctx, b, "r", 0, true); err != nil || s.Inputs != nil {
		t.Fatalf("step without inputs: %+v %v", s, err)
	}
	in := []commit.Input{
		{Dir: layout.RolloutDir("r", 0), ManifestSHA256: strings.Repeat("a", 64)},
		{Dir: layout.AdvantageDir("r", 0, "drmas"), ManifestSHA256: strings.Repeat("b", 64)},
	}
	s := newSet(t, 1, 2)
	s.Inputs = in
	if _, err := checkpoints.Publish(ctx, b, "r", s, "d"); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoints.LoadStep(ctx, b, "r", 1, false)
	if err != nil || len(got.Inputs) != 2 || got.Inputs[0] != in[0] || got.Inputs[1] != in[1] {
		t.Fatalf("loaded inputs %+v %v, want %+v", got, err, in)
	}
	if _, err := checkpoints.Publish(ctx, b, "r", s, "d"); err != nil {
		t.Fatalf("identical republish: %v", err)
	}
	other := newSet(t, 1, 2)
	other.Inputs = []commit.Input{{Dir: layout.RolloutDir("r", 3), ManifestSHA256: in[0].ManifestSHA256}, in[1]}
	if _, err := checkpoints.Publish(ctx, b, "r", other, "d"); !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("the same weights from other inputs: %v, want a conflict", err)
	}
}

// TestMissingStepListsTheCommittedOnes: asking for a step that is not committed names the
// steps that are, and still matches commit.ErrNotCommitted.
func TestMissingStepListsTheCommittedOnes(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for _, step := range []int64{0, 1, 2, 3, 5} {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, 1), "d"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := checkpoints.LoadStep(ctx, b, "r", 9, false)
	if !errors.Is(err, commit.ErrNotCommitted) || !strings.Contains(err.Error(), "checkpoint step 9 of run r") ||
		!strings.Contains(err.Error(), "(committed steps: 0..3, 5)") {
		t.Fatalf("error %v", err)
	}
	for steps, want := range map[string]string{"": "none", "4": "4", "1,2": "1, 2", "0,1,2,7,8,10,11,12": "0..2, 7, 8, 10..12"} {
		var in []int64
		for _, f := range strings.FieldsFunc(steps, func(r rune) bool { return r == ',' }) {
			n, _ := strconv.ParseInt(f, 10, 64)
			in = append(in, n)
		}
		if got := checkpoints.FormatSteps(in); got != want {
			t.Errorf("FormatSteps(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestWithdrawnStepLeavesLatestOnACommittedOne: two publishers of step 2 with other weights at
// the same time; A publishes (and points LATEST at 2), then B's upload replaces one of A's files,
// which withdraws A's commit. LATEST must not name the uncommitted step 2 (before, it did), and
// B's error says what happened.
func TestWithdrawnStepLeavesLatestOnACommittedOne(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 2; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, uint64(step)), "digest"); err != nil {
			t.Fatal(err)
		}
	}
	h := &storetest.PutHook{Bucket: b, Prefix: layout.CheckpointDir("r", 2) + "/", Before: func() {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, 2, 2), "digest"); err != nil {
			t.Fatalf("A's publish: %v", err)
		}
		if got, err := checkpoints.ReadLatest(ctx, b, "r"); err != nil || got != 2 {
			t.Fatalf("LATEST after A's publish: %d %v", got, err)
		}
	}}
	_, err := checkpoints.Publish(ctx, h, "r", newSet(t, 2, 99), "digest")
	if !errors.Is(err, commit.ErrWithdrawn) {
		t.Fatalf("B's publish: %v, want a withdrawn commit", err)
	}
	if ok, err := commit.IsCommitted(ctx, b, layout.CheckpointDir("r", 2)); err != nil || ok {
		t.Fatalf("step 2 committed %v (%v) after the withdrawal", ok, err)
	}
	if got, err := checkpoints.ReadLatest(ctx, b, "r"); err != nil || got != 1 {
		t.Fatalf("LATEST = %d (%v), want step 1, the newest committed", got, err)
	}
	// A rerun of either publishes step 2 whole.
	if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, 2, 2), "digest"); err != nil {
		t.Fatal(err)
	}
	if s, err := checkpoints.Load(ctx, b, "r", true, func(w string) { t.Errorf("warning: %s", w) }); err != nil || s.Step != 2 {
		t.Fatalf("load after the rerun: %v", err)
	}
}

// TestSetLatestSeesAWithdrawalDuringItsWrite: the step's commit is withdrawn between SetLatest's
// check and its write of LATEST; SetLatest must leave LATEST on a committed step and say so.
func TestSetLatestSeesAWithdrawalDuringItsWrite(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 3; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, uint64(step)), "digest"); err != nil {
			t.Fatal(err)
		}
	}
	if err := storage.PutBytes(ctx, b, layout.LatestKey("r"), []byte("step=000001\n")); err != nil {
		t.Fatal(err)
	}
	h := &storetest.PutHook{Bucket: b, Prefix: layout.LatestKey("r"), Before: func() {
		if err := b.Delete(ctx, path.Join(layout.CheckpointDir("r", 2), commit.ManifestName)); err != nil {
			t.Fatal(err)
		}
	}}
	if err := checkpoints.SetLatest(ctx, h, "r", 2); !errors.Is(err, commit.ErrWithdrawn) {
		t.Fatalf("SetLatest: %v, want a withdrawn step", err)
	}
	if got, err := checkpoints.ReadLatest(ctx, b, "r"); err != nil || got != 1 {
		t.Fatalf("LATEST = %d (%v), want step 1", got, err)
	}
}

// TestPublishOverAStepWithoutInputs: a committed step that records no inputs is not the step a
// learn publishes with its inputs, even with the same files, parent and config digest: a
// conflict, and the committed step is kept as it was.
func TestPublishOverAStepWithoutInputs(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	sha, err := checkpoints.Publish(ctx, b, "r", newSet(t, 1, 2), "d")
	if err != nil {
		t.Fatal(err)
	}
	again := newSet(t, 1, 2)
	again.Inputs = []commit.Input{{Dir: layout.RolloutDir("r", 1), ManifestSHA256: strings.Repeat("a", 64)}}
	if _, err := checkpoints.Publish(ctx, b, "r", again, "d"); !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("the same weights with inputs over a step without: %v, want a conflict", err)
	}
	if s, err := checkpoints.LoadStep(ctx, b, "r", 1, false); err != nil || s.Inputs != nil || s.ManifestSHA256 != sha {
		t.Fatalf("the committed step after the refused publish: %+v %v", s, err)
	}
}
