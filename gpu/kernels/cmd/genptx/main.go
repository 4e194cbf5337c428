// Command genptx writes gpu/kernels/kernels.ptx from the kernel definitions:
//
//	go run ./gpu/kernels/cmd/genptx [-o gpu/kernels/kernels.ptx]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
)

func main() {
	out := flag.String("o", "gpu/kernels/kernels.ptx", "output file")
	flag.Parse()
	ks, err := kernels.All()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genptx:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(ir.EmitPTX(ks)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genptx:", err)
		os.Exit(1)
	}
}
