package model

import (
	"os"
	"testing"

	"github.com/drmas-dev/drmas/model/internal/asmgen"
)

// TestGeneratedAssemblyCurrent: the unrolled kernels in the package are what
// model/internal/asmgen writes (run `go generate ./model` after changing it).
func TestGeneratedAssemblyCurrent(t *testing.T) {
	for name, want := range asmgen.Files() {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: run go generate ./model", name)
		}
	}
}
