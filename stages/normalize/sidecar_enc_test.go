package normalize

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"

	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/shards"
)

// TestIndexEncodings checks the encoder's hand-written RLE/bit-packed and delta pages against
// parquet-go's decoders.
func TestIndexEncodings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 7, 8, 9, 63, 64, 65, 1000, 32768} {
		for w := uint(0); w <= 20; w++ {
			vals := make([]int32, n)
			for i := range vals {
				if w > 0 {
					vals[i] = int32(r.Uint32() & (1<<w - 1))
				}
			}
			page := appendBitPacked([]byte{byte(w)}, vals, w)
			got, err := (&rle.DictionaryEncoding{}).DecodeInt32(nil, page)
			if err != nil {
				t.Fatalf("n=%d w=%d: %v", n, w, err)
			}
			if len(got) < n || !reflect.DeepEqual(got[:n], vals) {
				t.Fatalf("n=%d w=%d: bit-packed indices decode differently", n, w)
			}
			// RLE runs.
			var runs []byte
			var want []int32
			for len(want) < n {
				v, c := int32(0), 1+r.IntN(40)
				if w > 0 {
					v = int32(r.Uint32() & (1<<w - 1))
				}
				runs = appendRLERun(runs, uint32(v), c, int(w))
				for range c {
					want = append(want, v)
				}
			}
			got, err = (&rle.DictionaryEncoding{}).DecodeInt32(nil, append([]byte{byte(w)}, runs...))
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("n=%d w=%d: RLE runs decode differently (%v)", n, w, err)
			}
		}
		first := int64(r.Uint64() >> 1)
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = first + int64(i)
		}
		if !consecutive(ids) {
			t.Fatal("consecutive ids not recognised")
		}
		got, err := (&delta.BinaryPackedEncoding{}).DecodeInt64(nil, appendConsecutiveDelta(nil, first, n))
		if err != nil || !reflect.DeepEqual(got, ids) {
			t.Fatalf("n=%d: consecutive delta page decodes differently (%v)", n, err)
		}
		if n > 1 {
			ids[n/2]++
			if consecutive(ids) {
				t.Fatal("non-consecutive ids taken as consecutive")
			}
		}
	}
}

// TestSidecarSparsePlain: statistics computed sparsely (estimators.Result.SparseStats) with too
// many distinct values for a dictionary still give every row its pair's value (PLAIN path).
func TestSidecarSparsePlain(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	n := shards.RowGroupRows*3/2 + 5
	k := &shards.Keys{Agents: []string{"a", "b"}}
	for i := range n {
		g := int32(i / 3) // groups of three rows: a, b, a
		k.RowID = append(k.RowID, int64(i))
		k.Group = append(k.Group, g)
		k.Sample = append(k.Sample, 0)
		k.Agent = append(k.Agent, int32(i%3%2))
		k.Score = append(k.Score, r.NormFloat64())
	}
	for g := 0; g <= (n-1)/3; g++ {
		k.UIDs = append(k.UIDs, fmt.Sprintf("u%06d", g))
	}
	spec, err := estimators.ParseSpec("drmas")
	if err != nil {
		t.Fatal(err)
	}
	cols := ColumnsOf(k)
	var full estimators.Result
	if err := estimators.Compute(ctx, spec, cols, &full); err != nil {
		t.Fatal(err)
	}
	sparse := estimators.Result{SparseStats: shards.RowGroupRows}
	if err := estimators.Compute(ctx, spec, cols, &sparse); err != nil {
		t.Fatal(err)
	}
	var e sidecarEncoder
	data, err := e.encode(k, &sparse, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := rowSidecar(k, &full); !reflect.DeepEqual(got, want) {
		t.Fatal("sparse statistics encode to other rows than the full ones")
	}
}
