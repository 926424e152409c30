package taskiter

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadMatchesProc: the iterator's record of a sleeping process shows what its
// /proc/PID/schedstat and stat show, and the records are of processes, in pid order.
func TestReadMatchesProc(t *testing.T) {
	it, err := Open()
	if err != nil {
		t.Fatalf("the tests run as root on a kernel with BTF: %v", err)
	}
	defer it.Close()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	pid := sleeper.Process.Pid
	time.Sleep(100 * time.Millisecond) // past its exec: it sleeps from now on
	sched, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := it.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got *Task
	for i := range tasks {
		if i > 0 && tasks[i].PID <= tasks[i-1].PID {
			t.Fatalf("records out of pid order: %d after %d", tasks[i].PID, tasks[i-1].PID)
		}
		if tasks[i].PID == pid {
			got = &tasks[i]
		}
	}
	if got == nil {
		t.Fatalf("no record of the sleeper %d among %d", pid, len(tasks))
	}
	f := strings.Fields(string(sched))
	if want := f[0] + " " + f[2]; strconv.FormatUint(got.RunNs, 10)+" "+strconv.FormatUint(got.Slices, 10) != want {
		t.Errorf("run time and slices %d %d; schedstat says %s", got.RunNs, got.Slices, want)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	startTicks, _ := strconv.ParseUint(fields[19], 10, 64) // field 22 of stat
	if got.StartNs/10_000_000 != startTicks {
		t.Errorf("start %d ns = %d ticks; stat says %d", got.StartNs, got.StartNs/10_000_000, startTicks)
	}
	if got.UID != uint32(os.Getuid()) {
		t.Errorf("uid %d; the sleeper runs as %d", got.UID, os.Getuid())
	}
	// Another uid: a process started as nobody.
	nobody := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60")
	if err := nobody.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { nobody.Process.Kill(); nobody.Wait() }()
	for i := 0; i < 100; i++ { // past setpriv's setresuid and exec
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(nobody.Process.Pid) + "/comm"); string(b) == "sleep\n" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tasks, err = it.Read(tasks[:0]); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, task := range tasks {
		if task.PID == nobody.Process.Pid {
			found = true
			if task.UID != 65534 {
				t.Errorf("uid of a process of nobody: %d", task.UID)
			}
		}
	}
	if !found {
		t.Errorf("no record of %d", nobody.Process.Pid)
	}
	// Threads are not records: this test binary has several, and one record.
	self := 0
	for _, task := range tasks {
		if task.PID == os.Getpid() {
			self++
		}
	}
	if self != 1 {
		t.Errorf("%d records of this process", self)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(make([]byte, recordSize))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		tasks, err := parse(b, nil)
		if err == nil && len(tasks) != len(b)/recordSize {
			t.Fatalf("%d tasks from %d bytes", len(tasks), len(b))
		}
		for _, task := range tasks {
			if task.PID <= 0 {
				t.Fatalf("pid %d", task.PID)
			}
		}
	})
}
