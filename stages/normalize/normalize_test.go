package normalize

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// writeIteration commits a rollout iteration of `parts` parts of about rowsPerPart rows each
// (groups of 8 samples × 3 agents × 1–2 steps, tiny token columns) under root.
func writeIteration(tb testing.TB, root, run string, iter, parts, rowsPerPart int) int64 {
	tb.Helper()
	ctx := context.Background()
	b, err := filestore.New(root)
	if err != nil {
		tb.Fatal(err)
	}
	dir := layout.RolloutDir(run, iter)
	var files []commit.File
	var rows int64
	for p := 0; p < parts; p++ {
		rs := shardtest.Rows(shardtest.Options{Seed: 5, Part: p, Groups: max(1, rowsPerPart/34), Samples: 8,
			Agents: []string{"router", "searcher", "answerer"}, DropAgent: true, Tokens: 1, Run: run, Iteration: int32(iter)})
		var buf bytes.Buffer
		if err := shards.WriteTrajectories(&buf, p, rs); err != nil {
			tb.Fatal(err)
		}
		f, err := commit.PutFile(ctx, b, dir, shards.PartName(p, parts), buf.Bytes(), int64(len(rs)))
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, f)
		rows += int64(len(rs))
	}
	it := iter
	if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{Kind: "rollout", SchemaVersion: shards.SchemaVersion,
		Run: run, Iteration: &it, Rows: rows, Files: files}); err != nil {
		tb.Fatal(err)
	}
	return rows
}

func testEnv(tb testing.TB, root string) *stages.Env {
	b, err := filestore.New(root)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := configs.Default()
	cfg.Run = "t"
	cfg.Store = root
	return &stages.Env{Bucket: b, Config: cfg}
}

// rowSidecar is the sidecar as the row writer (shards.WriteAdvantages) encodes it.
func rowSidecar(k *shards.Keys, r *estimators.Result) []shards.AdvantageRow {
	rows := make([]shards.AdvantageRow, k.Len())
	for i := range rows {
		rows[i] = shards.AdvantageRow{
			RowID: k.RowID[i], UID: k.UIDs[k.Group[i]], Agent: k.Agents[k.Agent[i]],
			Advantage: r.Advantage[i], BaselineMean: r.BaselineMean[i], BaselineStd: r.BaselineStd[i], GroupSize: r.GroupSize[i],
		}
	}
	return rows
}

// TestSidecarEncoding checks the columnar sidecar encoder against the row writer for every
// estimator (dictionary and PLAIN statistics columns), over several row groups: parquet-go,
// Arrow-free DuckDB and the shards reader all read back the same rows, and the bytes are
// deterministic.
func TestSidecarEncoding(t *testing.T) {
	ctx := context.Background()
	rs := shardtest.Rows(shardtest.Options{Seed: 3, Part: 2, Groups: 2500, Samples: 8,
		Agents: []string{"router", "searcher", "answerer"}, DropAgent: true, Tokens: 1})
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, 2, rs); err != nil {
		t.Fatal(err)
	}
	f, err := shards.OpenParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "p")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := shards.ReadKeys(ctx, f, "p")
	if err != nil {
		t.Fatal(err)
	}
	if keys.Len() <= 2*shards.RowGroupRows {
		t.Fatalf("want several row groups, have %d rows", keys.Len())
	}
	cols := ColumnsOf(keys)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := t.TempDir()
	for _, name := range []string{"drmas", "grpo", "grpo_step", "drmas_nostd", "rloo", "rloo_agent", "random"} {
		var res estimators.Result
		perPair := false
		if name == "random" {
			// Statistics with a distinct value a row: the PLAIN fallback of the encoder.
			r := rand.New(rand.NewPCG(1, 2))
			for range keys.Len() {
				res.Advantage = append(res.Advantage, float32(r.NormFloat64()))
				res.BaselineMean = append(res.BaselineMean, r.NormFloat64())
				res.BaselineStd = append(res.BaselineStd, r.Float64())
				res.GroupSize = append(res.GroupSize, r.Int32())
			}
		} else {
			sp, err := estimators.ParseSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := estimators.Compute(ctx, sp, cols, &res); err != nil {
				t.Fatal(err)
			}
			perPair = sp.PerPair()
		}
		want := rowSidecar(keys, &res)
		var e sidecarEncoder
		data, err := e.encode(keys, &res, perPair)
		if err != nil {
			t.Fatal(name, err)
		}
		// The same bytes again, and without the per-pair promise (every row checked).
		again, err := encodeSidecar(keys, &res)
		if err != nil || !bytes.Equal(data, again) {
			t.Fatalf("%s: encoding not deterministic (err %v)", name, err)
		}
		got, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), name)
		if err != nil {
			t.Fatal(name, err)
		}
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: row %d: got %+v, want %+v", name, i, got[i], want[i])
				}
			}
			t.Fatalf("%s: %d rows read, want %d", name, len(got), len(want))
		}
		pf, err := shards.OpenParquet(bytes.NewReader(data), int64(len(data)), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := shards.CheckSchema(pf, shards.AdvantageSchema(), name); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(pf.Schema().String(), shards.AdvantageSchema().String()) {
			t.Fatalf("%s: schema\n%s\nwant\n%s", name, pf.Schema(), shards.AdvantageSchema())
		}
		// Column statistics are the exact bounds of each row group's values.
		for rgi, rg := range pf.Metadata().RowGroups {
			rows := want[rgi*shards.RowGroupRows : rgi*shards.RowGroupRows+int(rg.NumRows)]
			for ci, c := range rg.Columns {
				var lo, hi float64
				for i, r := range rows {
					v := []float64{float64(r.RowID), 0, 0, float64(r.Advantage), r.BaselineMean, r.BaselineStd, float64(r.GroupSize)}[ci]
					if i == 0 || v < lo {
						lo = v
					}
					if i == 0 || v > hi {
						hi = v
					}
				}
				st := c.MetaData.Statistics
				dec := func(b []byte) float64 {
					switch ci {
					case 0:
						return float64(int64(binary.LittleEndian.Uint64(b)))
					case 3:
						return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
					case 4, 5:
						return math.Float64frombits(binary.LittleEndian.Uint64(b))
					case 6:
						return float64(int32(binary.LittleEndian.Uint32(b)))
					}
					return 0
				}
				if ci != 1 && ci != 2 && (dec(st.MinValue) != lo || dec(st.MaxValue) != hi) {
					t.Fatalf("%s: row group %d column %d: statistics [%v, %v], values in [%v, %v]", name, rgi, ci, dec(st.MinValue), dec(st.MaxValue), lo, hi)
				}
			}
		}
		// DuckDB reads the same values, and its statistics-based filters agree with a scan.
		p := filepath.Join(dir, name+".parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var n, bad int64
		var sumAdv, sumGS float64
		if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE uid IS NULL OR agent IS NULL), sum(advantage), sum(group_size) FROM read_parquet('`+p+`')`).Scan(&n, &bad, &sumAdv, &sumGS); err != nil {
			t.Fatal(name, err)
		}
		var wantAdv, wantGS float64
		for _, r := range want {
			wantAdv += float64(r.Advantage)
			wantGS += float64(r.GroupSize)
		}
		if n != int64(len(want)) || bad != 0 || wantGS != sumGS || abs(sumAdv-wantAdv) > 1e-6*float64(n) {
			t.Fatalf("%s: DuckDB reads %d rows (%d null keys), Σadv %v Σgs %v; want %d, %v, %v", name, n, bad, sumAdv, sumGS, len(want), wantAdv, wantGS)
		}
		r := want[len(want)/3]
		var m int64
		if err := db.QueryRow(`SELECT count(*) FROM read_parquet('`+p+`') WHERE row_id = ? AND uid = ? AND agent = ? AND baseline_mean = ? AND baseline_std = ?`,
			r.RowID, r.UID, r.Agent, r.BaselineMean, r.BaselineStd).Scan(&m); err != nil || m != 1 {
			t.Fatalf("%s: DuckDB point lookup found %d rows (err %v)", name, m, err)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestRunConcurrencyDeterministic runs the stage with 1 and several goroutines: the sidecars,
// diagnostics and manifests must be byte-identical.
func TestRunConcurrencyDeterministic(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	writeIteration(t, root, "t", 3, 5, 20000)
	read := func() map[string][]byte {
		out := map[string][]byte{}
		iterDir := filepath.Join(root, filepath.FromSlash(layout.IterDir("t", 3)))
		for _, d := range []string{"advantage", "diagnostics"} {
			filepath.Walk(filepath.Join(iterDir, d), func(p string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					data, _ := os.ReadFile(p)
					out[p] = data
				}
				return nil
			})
		}
		return out
	}
	clean := func() {
		iterDir := filepath.Join(root, filepath.FromSlash(layout.IterDir("t", 3)))
		os.RemoveAll(filepath.Join(iterDir, "advantage"))
		os.RemoveAll(filepath.Join(iterDir, "diagnostics"))
	}
	var first map[string][]byte
	for _, procs := range []int{1, 3} {
		prev := runtime.GOMAXPROCS(procs)
		clean()
		res, err := Run(ctx, testEnv(t, root), Options{Iteration: 3, Estimators: []string{"drmas", "grpo", "rloo"}})
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diagnostics["drmas"]) != 3 {
			t.Fatalf("diagnostics: %+v", res.Diagnostics)
		}
		got := read()
		if first == nil {
			first = got
			if len(got) != 3*5+3*2+3 { // sidecars + manifests, diagnostics + manifests
				t.Fatalf("%d files written", len(got))
			}
			continue
		}
		if !reflect.DeepEqual(got, first) {
			for k := range first {
				if !bytes.Equal(first[k], got[k]) {
					t.Errorf("%s differs between GOMAXPROCS 1 and %d", k, procs)
				}
			}
		}
	}
	// The sidecars read back to the estimator's columns.
	b, _ := filestore.New(root)
	m, _, err := commit.Read(ctx, b, layout.AdvantageDir("t", 3, "drmas"))
	if err != nil {
		t.Fatal(err)
	}
	in, _, _ := commit.Read(ctx, b, layout.RolloutDir("t", 3))
	sp, _ := estimators.ParseSpec("drmas")
	for i, f := range m.Files {
		data, err := commit.ReadFile(ctx, b, layout.AdvantageDir("t", 3, "drmas"), f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := shards.OpenColumns(ctx, b, path.Join(layout.RolloutDir("t", 3), in.Files[i].Name), in.Files[i].Bytes, shards.KeyColumns)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := shards.ReadKeys(ctx, pf, f.Name)
		if err != nil {
			t.Fatal(err)
		}
		var res estimators.Result
		if err := estimators.Compute(ctx, sp, ColumnsOf(keys), &res); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, rowSidecar(keys, &res)) {
			t.Fatalf("%s: sidecar differs from the kernel's result", f.Name)
		}
	}
}

// hookBucket calls its hooks before passing Get and GetRange on to the bucket it wraps; a hook's
// error is returned instead.
type hookBucket struct {
	storage.Bucket
	get, getRange func(key string) error
}

func (b *hookBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if b.get != nil {
		if err := b.get(key); err != nil {
			return nil, err
		}
	}
	return b.Bucket.Get(ctx, key)
}

func (b *hookBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if b.getRange != nil {
		if err := b.getRange(key); err != nil {
			return nil, err
		}
	}
	return b.Bucket.GetRange(ctx, key, off, length)
}

// noManifests fails t if iteration iter has a committed advantage or diagnostics folder.
func noManifests(t *testing.T, env *stages.Env, iter int) {
	t.Helper()
	for _, d := range []string{"advantage/", "diagnostics/"} {
		prefix := layout.IterDir(env.Config.Run, iter) + "/" + d
		err := env.Bucket.Iter(context.Background(), prefix, func(k string) error {
			if strings.HasSuffix(k, commit.ManifestName) {
				t.Errorf("committed after an error: %s", k)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunCancelled checks that a cancelled ctx stops the stage with ctx's error, whether it is
// cancelled before the stage starts or while parts are being read and computed, and that
// nothing is committed.
func TestRunCancelled(t *testing.T) {
	root := t.TempDir()
	writeIteration(t, root, "t", 1, 4, 5000)
	opts := Options{Iteration: 1, Estimators: []string{"drmas", "grpo"}}
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		env := testEnv(t, root)
		_, err := Run(ctx, env, opts)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if strings.Contains(err.Error(), "not committed") {
			t.Errorf("a cancelled manifest read is reported as a missing rollout: %v", err)
		}
		noManifests(t, env, 1)
	})
	t.Run("during parts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		env := testEnv(t, root)
		var reads atomic.Int32
		env.Bucket = &hookBucket{Bucket: env.Bucket, getRange: func(key string) error {
			if strings.HasPrefix(key, layout.RolloutDir("t", 1)+"/part-") && reads.Add(1) == 1 {
				cancel() // the first read of a part's columns goes through; everything after sees ctx done
			}
			return nil
		}}
		_, err := Run(ctx, env, opts)
		if reads.Load() == 0 {
			t.Fatal("no part was read: the cancel did not happen while parts were processed")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		noManifests(t, env, 1)
	})
}

// TestRunManifestReadError: only a missing rollout manifest is reported as "not committed";
// any other error reading it is returned as is.
func TestRunManifestReadError(t *testing.T) {
	root := t.TempDir()
	writeIteration(t, root, "t", 1, 2, 1000)
	env := testEnv(t, root)
	denied := fmt.Errorf("get %s: %w", commit.ManifestName, fs.ErrPermission)
	env.Bucket = &hookBucket{Bucket: env.Bucket, get: func(key string) error {
		if key == layout.RolloutDir("t", 1)+"/"+commit.ManifestName {
			return denied
		}
		return nil
	}}
	_, err := Run(context.Background(), env, Options{Iteration: 1, Estimators: []string{"drmas"}})
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("got %v, want an error wrapping fs.ErrPermission", err)
	}
	if strings.Contains(err.Error(), "not committed") || strings.Contains(err.Error(), "run-stage rollout") {
		t.Errorf("a permission error is reported as a missing rollout: %v", err)
	}
	noManifests(t, env, 1)
	// A missing manifest still gets the advice.
	_, err = Run(context.Background(), testEnv(t, root), Options{Iteration: 2, Estimators: []string{"drmas"}})
	if !errors.Is(err, commit.ErrNotCommitted) || !strings.Contains(err.Error(), "run-stage rollout --iter 2") {
		t.Fatalf("missing rollout: got %v, want the not-committed advice", err)
	}
}

// BenchmarkNormalize times the stage (estimator drmas) over a committed iteration of about
// 1 M rows in 8 parts, without real token columns, on a local folder store.
func BenchmarkNormalize(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	rows := writeIteration(b, root, "t", 1, 8, 125_000)
	env := testEnv(b, root)
	iterDir := filepath.Join(root, filepath.FromSlash(layout.IterDir("t", 1)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		os.RemoveAll(filepath.Join(iterDir, "advantage"))
		os.RemoveAll(filepath.Join(iterDir, "diagnostics"))
		b.StartTimer()
		if _, err := Run(ctx, env, Options{Iteration: 1, Estimators: []string{"drmas"}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(rows), "rows")
	_ = fmt.Sprint()
}

// TestRunMissingPart: a part the committed rollout lists but the store lost is named, with what
// to do, under the stage's name.
func TestRunMissingPart(t *testing.T) {
	root := t.TempDir()
	writeIteration(t, root, "t", 1, 2, 1000)
	env := testEnv(t, root)
	lost := layout.RolloutDir("t", 1) + "/" + shards.PartName(1, 2)
	if err := env.Bucket.Delete(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), env, Options{Iteration: 1, Estimators: []string{"drmas"}})
	want := "normalize iter 1: " + lost + " is listed in the committed rollout but missing from the store: restore it, or delete " +
		layout.RolloutDir("t", 1) + "/ and roll the iteration out again"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !storage.IsNotFound(err) {
		t.Fatalf("got %v\nwant %q…, matching storage.ErrNotFound", err, want)
	}
	noManifests(t, env, 1)
}
