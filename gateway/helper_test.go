package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain turns the test binary into the agent programs of the tests: `gateway.test
// program <mode>` behaves as mode says (helperProgram).
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "program" {
		os.Exit(helperProgram(os.Args[2]))
	}
	os.Exit(m.Run())
}

// call posts a chat call to the episode's gateway as a client would and returns the content.
func call(agent, content string) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": agent, "messages": []map[string]string{{"role": "user", "content": content}}})
	req, _ := http.NewRequest(http.MethodPost, os.Getenv("OPENAI_BASE_URL")+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		return "", fmt.Errorf("decode: %v", err)
	}
	return out.Choices[0].Message.Content, nil
}

// helperProgram is one agent program per mode; its exit status is the process's.
func helperProgram(mode string) int {
	switch mode {
	case "team": // solver, then verifier; the verifier's call is penalized
		var task struct{ Question string }
		_ = json.Unmarshal([]byte(os.Getenv("DRMAS_TASK")), &task)
		a, err := call("solver", task.Question)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := call("verifier", a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("some log line")
		fmt.Println(`{"reward": 0.75, "penalties": [0, 0.25]}`)
	case "env": // prints its environment's names and the task, then a reward
		var names []string
		for _, kv := range os.Environ() {
			names = append(names, strings.SplitN(kv, "=", 2)[0])
		}
		sort.Strings(names)
		fmt.Fprintln(os.Stderr, strings.Join(names, ","), os.Getenv("DRMAS_TASK"))
		return 3
	case "exit":
		fmt.Fprintln(os.Stderr, "Traceback: boom")
		return 2
	case "noreward":
		fmt.Println("done")
	case "malformed":
		fmt.Println(`{"reward": "high"}`)
	case "sleep":
		time.Sleep(time.Hour)
	case "calls": // one call more than the tests' max_calls of 3
		for i := 0; i < 4; i++ {
			if _, err := call("solver", "again"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				break
			}
		}
		fmt.Println(`{"reward": 1}`)
	case "fork": // starts a child that never exits, writes its pid, answers and exits
		child := exec.Command(os.Args[0], "program", "sleep")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr // holds the pipes open
		if err := child.Start(); err != nil {
			return 1
		}
		_ = os.WriteFile("child.pid", []byte(fmt.Sprint(child.Process.Pid)), 0o644)
		if _, err := call("solver", "hi"); err != nil {
			return 1
		}
		fmt.Println(`{"reward": 1}`)
	case "escape": // a child that leaves the process group and holds stdout, then a reward
		child := exec.Command(os.Args[0], "program", "sleep")
		child.Stdout = os.Stdout
		child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := child.Start(); err != nil {
			return 1
		}
		f, err := os.OpenFile("children.pid", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return 1
		}
		fmt.Fprintln(f, child.Process.Pid)
		f.Close()
		fmt.Println(`{"reward": 0.5}`)
	default:
		return 9
	}
	return 0
}
