package commit_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/drmas-dev/drmas/commit"
)

func fuzzAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// FuzzDecode: the manifest parser rejects bad input with an error naming the manifest, never
// panics, keeps memory proportional to the input, and whatever it accepts re-encodes
// deterministically to a manifest that decodes to the same encoding.
func FuzzDecode(f *testing.F) {
	iter, step, parent := 3, int64(4), int64(3)
	m := &commit.Manifest{Kind: "checkpoint", SchemaVersion: 1, Run: "r1", Iteration: &iter, Step: &step, Parent: &parent, Rows: 5,
		Files: []commit.File{
			{Name: "m1/model.safetensors", Rows: 2, Bytes: 10, SHA256: commit.Digest([]byte("a"))},
			{Name: "m1/optim.safetensors", Rows: 3, Bytes: 0, SHA256: commit.Digest(nil)},
		},
		ConfigDigest: "abc", Inputs: []commit.Input{{Dir: "runs/r1/iter=000003/rollout", ManifestSHA256: commit.Digest([]byte("x"))}},
		Params: map[string]string{"k": "v"}}
	valid, err := commit.Encode(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{"kind":"rollout","schema_version":1,"run":"r","rows":0,"files":[]}`))
	f.Add([]byte(`{"kind":"x","run":"r","rows":1,"files":[{"name":"../a","bytes":-1,"sha256":"zz"}]}`))
	f.Add([]byte(`{"kind":"x","run":"r","rows":0,"files":null,"extra":1}`))
	f.Add([]byte(`{"kind":"x","run":"r","rows":0} {}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		before := fuzzAlloc()
		m, err := commit.Decode(data, "fuzz/_MANIFEST.json")
		if got := fuzzAlloc() - before; got > 64<<20+1000*uint64(len(data)) {
			t.Fatalf("Decode allocated %d MiB for %d bytes", got>>20, len(data))
		}
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte("fuzz/_MANIFEST.json")) {
				t.Fatalf("error does not name the manifest: %v", err)
			}
			return
		}
		enc, err := commit.Encode(m)
		if err != nil {
			t.Fatalf("a decoded manifest does not encode: %v", err)
		}
		m2, err := commit.Decode(enc, "again")
		if err != nil {
			t.Fatalf("an encoded manifest does not decode: %v\n%s", err, enc)
		}
		enc2, err := commit.Encode(m2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %v\n%s\n%s", err, enc, enc2)
		}
	})
}
