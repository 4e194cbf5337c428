// Package nvidiatest finds the NVIDIA parts that GPU-less tests use, as installed by
// gpu/tools/install-nvidia-tools.sh (which .ci/run runs): NVIDIA's ptxas and nvdisasm, and
// the real user-space driver libraries (libcuda.so.1, libnvidia-ml.so.1) in a folder of their
// own, for loading in child processes. It also tells whether the machine has a GPU driver.
//
// Lookup order for a tool: $DRMAS_<NAME> (e.g. DRMAS_PTXAS), PATH, /usr/local/cuda/bin, then
// $DRMAS_TOOLS/bin or ~/.cache/drmas-tools/bin. For the driver libraries:
// $DRMAS_NVIDIA_DRIVER_LIBS, then $DRMAS_TOOLS/nvidia-driver or
// ~/.cache/drmas-tools/nvidia-driver. Errors say how to install what is missing.
package nvidiatest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// InstallHint is the command that installs everything this package finds.
const InstallHint = "bash gpu/tools/install-nvidia-tools.sh"

func toolsDirs(sub string) []string {
	var dirs []string
	if d := os.Getenv("DRMAS_TOOLS"); d != "" {
		dirs = append(dirs, filepath.Join(d, sub))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "drmas-tools", sub))
	}
	return dirs
}

// Tool returns the path of NVIDIA's tool name ("ptxas", "nvdisasm").
func Tool(name string) (string, error) {
	env := "DRMAS_" + strings.ToUpper(name)
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range append([]string{"/usr/local/cuda/bin"}, toolsDirs("bin")...) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (%s, PATH, /usr/local/cuda/bin, ~/.cache/drmas-tools/bin); install with `%s`", name, env, InstallHint)
}

// DriverLibs returns the folder holding NVIDIA's libcuda.so.1 and libnvidia-ml.so.1 for
// child processes' LD_LIBRARY_PATH.
func DriverLibs() (string, error) {
	dirs := toolsDirs("nvidia-driver")
	if d := os.Getenv("DRMAS_NVIDIA_DRIVER_LIBS"); d != "" {
		dirs = []string{d}
	}
	for _, d := range dirs {
		ok := true
		for _, lib := range []string{"libcuda.so.1", "libnvidia-ml.so.1"} {
			if _, err := os.Stat(filepath.Join(d, lib)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("NVIDIA driver libraries not found (DRMAS_NVIDIA_DRIVER_LIBS, ~/.cache/drmas-tools/nvidia-driver); install with `%s`", InstallHint)
}

// HasGPU says whether this machine has NVIDIA's kernel driver loaded
// (/proc/driver/nvidia/version): tests of the driver libraries without a GPU do not apply
// there. (/dev/nvidiactl is no sign: run as root, the user-space library creates it.)
func HasGPU() bool {
	_, err := os.Stat("/proc/driver/nvidia/version")
	return err == nil
}

// devNodes are the device files NVIDIA's user-space libraries create when run as root.
var devNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0"}

// RunChild runs cmd, a test child process that loads the driver libraries, and returns its
// combined output. Run as root on a machine without the kernel driver, NVIDIA's libraries
// create /dev/nvidiactl (and maybe other nodes) for a driver that is not there: the ones the
// child created are removed afterwards, so the machine is left as it was. Children of
// concurrent test processes run one at a time (a lock file), so none removes another's node
// or keeps one another created.
func RunChild(cmd *exec.Cmd) ([]byte, error) {
	defer childLock()()
	var before []string
	for _, n := range devNodes {
		if _, err := os.Lstat(n); err == nil {
			before = append(before, n)
		}
	}
	out, err := cmd.CombinedOutput()
	if HasGPU() {
		return out, err
	}
	for _, n := range devNodes {
		if _, e := os.Lstat(n); e == nil && !slices.Contains(before, n) {
			_ = os.Remove(n)
		}
	}
	return out, err
}

// Required says whether a missing part must fail the test instead of skipping it: under
// CI=true when .ci/run exported DRMAS_NVIDIA_TOOLS=1 after installing them.
func Required() bool {
	return os.Getenv("CI") == "true" && os.Getenv("DRMAS_NVIDIA_TOOLS") == "1"
}

// Missing ends t for a part that could not be found (err says how to install it): a failure
// where Required, since .ci/run installed it, otherwise a skip.
func Missing(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatal(err)
	}
	t.Skip(err)
}

// RunTestChild reruns the calling test binary's test name in a child process with env added
// (through RunChild), logs its output, and fails t unless the child passed and printed
// marker.
func RunTestChild(t testing.TB, name, marker string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := RunChild(cmd)
	t.Logf("child:\n%s", out)
	if err != nil || !strings.Contains(string(out), marker) {
		t.Fatalf("child failed: %v", err)
	}
}

// MappedLibs returns the paths of the shared objects mapped into this process whose base
// name starts with prefix (from /proc/self/maps), deduplicated in map order.
func MappedLibs(prefix string) ([]string, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		p := fields[5]
		if strings.HasPrefix(filepath.Base(p), prefix) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, sc.Err()
}
