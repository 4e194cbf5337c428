//go:build tools

// Package deps pins the module's direct dependencies before the code that uses them lands.
package deps

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/duckdb/duckdb-go/v2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "gonum.org/v1/gonum/blas/blas32"
)
