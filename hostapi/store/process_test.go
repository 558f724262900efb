package store

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Tests that need a second process run this test binary again with
// STORE_CHILD set: the child does one job on the data directory in
// STORE_DIR, talking to the parent through stdout (and stdin), and exits.
func TestMain(m *testing.M) {
	if mode := os.Getenv("STORE_CHILD"); mode != "" {
		os.Exit(runChild(mode, os.Getenv("STORE_DIR")))
	}
	os.Exit(m.Run())
}

func runChild(mode, dir string) int {
	switch mode {
	case "crash":
		crashChild(dir)
	case "lock":
		// Hold the server lock until the parent closes our stdin.
		release, err := LockServer(dir)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		release()
	case "write":
		// A local CLI write beside a server: create the files named in
		// STORE_NAMES, one line each.
		s, err := Open(Config{Dir: dir})
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		defer s.Close()
		for _, name := range strings.Split(os.Getenv("STORE_NAMES"), ",") {
			if _, err := s.Workspace("default").Create(context.Background(), CreateOptions{Name: name}, strings.NewReader("from the CLI\n")); err != nil {
				fmt.Println("error", err)
				return 1
			}
		}
		fmt.Println("done")
	default:
		fmt.Println("unknown child mode", mode)
		return 2
	}
	return 0
}

// child starts this test binary as a child process in mode and returns it
// with its stdout as lines.
func child(t *testing.T, mode, dir string, env ...string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"STORE_CHILD=" + mode, "STORE_DIR=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out), stdin
}

func expectLine(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("child ended before saying %q: %v", want, sc.Err())
	}
	if got := sc.Text(); got != want {
		t.Fatalf("child said %q, want %q", got, want)
	}
}

// TestCrashDuringWrites SIGKILLs a child process that writes, modifies and
// deletes files in a loop, at a different point of its work each round
// (after its 1st, 7th, 23rd… committed write, which it reports on stdout),
// then checks that start-up alone cleaned what the crash left (fsck finds
// nothing) and that every file's body matches its metadata.
func TestCrashDuringWrites(t *testing.T) {
	dir := t.TempDir()
	for round, after := range []int{1, 7, 23, 41} {
		cmd, lines, _ := child(t, "crash", dir)
		for i := 0; i < after; i++ {
			if !lines.Scan() {
				t.Fatalf("round %d: the child stopped after %d commits", round, i)
			}
		}
		// The child keeps writing while it dies: the kill lands somewhere
		// inside a write.
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		s, err := Open(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.Fsck(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) != 0 {
			t.Fatalf("round %d: start-up left problems after the crash: %+v", round, rep.Problems)
		}
		if rep.FilesChecked == 0 {
			t.Fatalf("round %d: the child committed nothing", round)
		}
		entries, _ := os.ReadDir(s.tmpRoot)
		if len(entries) != 1 {
			t.Fatalf("round %d: temp directories left: %d, want only the open store's", round, len(entries))
		}
		s.Close()
	}
}

func crashChild(dir string) {
	s, err := Open(Config{Dir: dir})
	if err != nil {
		panic(err)
	}
	w := s.Workspace("default")
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		name := fmt.Sprintf("f%d.txt", i%20)
		body := strings.Repeat(fmt.Sprintf("line %d\n", i), 2000+i%500)
		var err error
		if _, rerr := w.Resolve(ctx, name); rerr == nil {
			_, err = w.Modify(ctx, name, func(_ *File, _ string, out io.Writer) error { _, err := io.WriteString(out, body); return err })
		} else {
			_, err = w.Create(ctx, CreateOptions{Name: name}, strings.NewReader(body))
		}
		if i%7 == 0 {
			w.Delete(ctx, fmt.Sprintf("f%d.txt", (i+3)%20))
		}
		if err == nil {
			fmt.Fprintf(out, "committed %d\n", i)
			out.Flush()
		}
	}
}

// TestOneServerPerDataDirectory: a second server on a served data
// directory, and fsck beside it, are refused with BUSY naming the server's
// process; once it is gone (killed, not even released), both work.
func TestOneServerPerDataDirectory(t *testing.T) {
	dir := t.TempDir()
	cmd, lines, stdin := child(t, "lock", dir)
	expectLine(t, lines, "locked")
	pid := fmt.Sprintf("process %d (metaclaw serve, since ", cmd.Process.Pid)

	_, err := LockServer(dir)
	if apierr.CodeOf(err) != apierr.Busy || !strings.Contains(apierr.Of(err).Message, pid) || strings.Contains(err.Error(), dir) {
		t.Fatalf("second server: %v", err)
	}
	s := openTest(t, Config{Dir: dir})
	create(t, s.Workspace("default"), "a.txt", "a") // local CLI writes work beside a server
	_, err = s.Fsck(context.Background(), true)
	if apierr.CodeOf(err) != apierr.Busy || !strings.Contains(apierr.Of(err).Message, "fsck cannot run while "+pid) {
		t.Fatalf("fsck beside a server: %v", err)
	}

	// The server process dies without releasing the lock.
	_ = stdin
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	rep, err := s.Fsck(context.Background(), true)
	if err != nil || len(rep.Problems) != 0 || rep.FilesChecked != 1 {
		t.Fatalf("fsck after the server left: %+v %v", rep, err)
	}
	release, err := LockServer(dir)
	if err != nil {
		t.Fatalf("a new server after the old one died: %v", err)
	}
	// In this process: a second lock is refused, but our own fsck runs.
	if _, err := LockServer(dir); apierr.CodeOf(err) != apierr.Busy || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("second server in the same process: %v", err)
	}
	if rep, err := s.Fsck(context.Background(), false); err != nil || rep.FilesChecked != 1 {
		t.Fatalf("the server's own fsck: %+v %v", rep, err)
	}
	release()
	release() // idempotent
	release2, err := LockServer(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}

// TestEventsCrossProcesses: a local CLI write to a served data directory
// reaches the server's subscribers, in order, with the workspace's next
// event numbers.
func TestEventsCrossProcesses(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Config{Dir: dir})
	w := s.Workspace("default")
	create(t, w, "first.txt", "1")
	events, cancel := s.Bus().Subscribe("default", 0)
	defer cancel()
	_, lines, _ := child(t, "write", dir, "STORE_NAMES=cli-a.txt,cli-b.txt")
	expectLine(t, lines, "done")
	create(t, w, "last.txt", "2")
	var got []string
	timeout := time.After(10 * time.Second) // a guard against a hang, not a wait
	for len(got) < 3 {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("subscription closed")
			}
			got = append(got, fmt.Sprintf("%d %s %v", e.Seq, e.Type, e.Data["name"]))
		case <-timeout:
			t.Fatalf("events so far: %v", got)
		}
	}
	want := "2 file:created cli-a.txt|3 file:created cli-b.txt|4 file:created last.txt"
	if strings.Join(got, "|") != want {
		t.Fatalf("events: %q, want %q", strings.Join(got, "|"), want)
	}
}
