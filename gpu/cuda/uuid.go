package cuda

import "fmt"

// FormatUUID writes a CUuuid the way NVML prints device UUIDs.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
