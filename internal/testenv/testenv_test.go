package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// subjectEnv makes TestMissingSubject call Missing; TestMissing runs this test binary again with it set.
const subjectEnv = "CHAOSBENCH_TESTENV_SUBJECT"

// TestMissingSubject is what TestMissing runs in a child process: a test that finds fio missing. Run
// directly, without subjectEnv, it does nothing.
func TestMissingSubject(t *testing.T) {
	if os.Getenv(subjectEnv) == "" {
		return
	}
	Missing(t, Fio, "fio is not installed (%s)", "apt-get install fio")
	t.Log("after Missing") // never reached: Missing skips or fails the test
}

// TestMissing runs a test that finds fio missing, in a child process, under each value of CHAOSBENCH_REQUIRE:
// it skips with its reason unless the value requires fio, and then the test (and so `go test`) fails,
// saying what was required and what is missing.
func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		name, require string
		fail          bool
		says          []string
	}{
		{"not set: skips with the reason", "", false, []string{"--- SKIP: TestMissingSubject", "fio is not installed (apt-get install fio)"}},
		{"blank: skips", " , ", false, []string{"--- SKIP: TestMissingSubject"}},
		{"another tool required: skips", "docker,chromium", false, []string{"--- SKIP: TestMissingSubject"}},
		{"all: fails", "all", true, []string{"--- FAIL: TestMissingSubject", "fio is required here (CHAOSBENCH_REQUIRE=all), and missing: fio is not installed (apt-get install fio)"}},
		{"named: fails", "docker, fio", true, []string{"--- FAIL: TestMissingSubject", "fio is required here (CHAOSBENCH_REQUIRE=docker, fio)"}},
		{"a misspelt tool: fails", "docker,fi0", true, []string{"--- FAIL: TestMissingSubject", `"fi0" is not a tool`, "this test needs fio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMissingSubject$", "-test.v", "-test.count=1")
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, Env+"=") }),
				subjectEnv+"=1", Env+"="+tc.require)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatalf("cannot run the test binary: %v", err)
			}
			if failed := err != nil; failed != tc.fail {
				t.Errorf("failed %v (%v), want %v:\n%s", failed, err, tc.fail, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output does not say %q:\n%s", s, out.String())
				}
			}
			if strings.Contains(out.String(), "after Missing") {
				t.Errorf("the test went on after Missing:\n%s", out.String())
			}
		})
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []Tool
		err   string
	}{
		{"", nil, ""},
		{"all", Tools(), ""},
		{" all ", Tools(), ""},
		{"fuse,docker", []Tool{FUSE, Docker}, ""},
		{" kube , ,failpoints ", []Tool{Kube, Failpoints}, ""},
		{"fuse,all", nil, `"all" is not a tool`},
		{"FUSE", nil, `"FUSE" is not a tool`},
		{"1", nil, `"1" is not a tool`},
	} {
		got, err := Required(tc.value)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one saying %s", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.value, got, err, tc.want)
		}
	}
}

// TestLongSubject is what TestLong runs in a child process: a long test. Run directly, without subjectEnv,
// it does nothing.
func TestLongSubject(t *testing.T) {
	if os.Getenv(subjectEnv) == "" {
		return
	}
	Long(t, "a 10-minute soak")
	t.Log("the long test ran")
}

// TestMisnamedLongSubject is a long test whose name make test-long would not select.
func TestMisnamedLongSubject(t *testing.T) {
	if os.Getenv(subjectEnv) == "" {
		return
	}
	Long(t, "a 10-minute soak")
	t.Log("the long test ran")
}

// TestLong runs a long test, in a child process, under each value of CHAOSBENCH_LONG: it skips saying
// that it runs in make test-long unless the value is 1, and then it runs; another value fails it, and so
// does a name make test-long would not select, whatever the value.
func TestLong(t *testing.T) {
	for _, tc := range []struct {
		name, subject, long string
		fail, ran           bool
		says                []string
	}{
		{"not set: skips", "TestLongSubject", "", false, false,
			[]string{"--- SKIP: TestLongSubject", "long test (a 10-minute soak): runs in make test-long (CHAOSBENCH_LONG=1)"}},
		{"1: runs", "TestLongSubject", "1", false, true, []string{"--- PASS: TestLongSubject"}},
		{"another value: fails", "TestLongSubject", "yes", true, false,
			[]string{"--- FAIL: TestLongSubject", "CHAOSBENCH_LONG=yes: expected 1"}},
		{"misnamed: fails in make test", "TestMisnamedLongSubject", "", true, false,
			[]string{"--- FAIL: TestMisnamedLongSubject", "its name must match ^TestLong[A-Z]"}},
		{"misnamed: fails in make test-long", "TestMisnamedLongSubject", "1", true, false,
			[]string{"--- FAIL: TestMisnamedLongSubject", "its name must match ^TestLong[A-Z]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^"+tc.subject+"$", "-test.v", "-test.count=1")
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, LongEnv+"=") }),
				subjectEnv+"=1", LongEnv+"="+tc.long)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatalf("cannot run the test binary: %v", err)
			}
			if failed := err != nil; failed != tc.fail {
				t.Errorf("failed %v (%v), want %v:\n%s", failed, err, tc.fail, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output does not say %q:\n%s", s, out.String())
				}
			}
			if ran := strings.Contains(out.String(), "the long test ran"); ran != tc.ran {
				t.Errorf("the long test ran: %v, want %v:\n%s", ran, tc.ran, out.String())
			}
		})
	}
}

func TestIsLongName(t *testing.T) {
	for name, want := range map[string]bool{
		"TestLongSoak": true, "TestLongSoak/3.5": true, "TestLong2Runs": false, "TestLongestGap": false,
		"TestLong": false, "TestSoakLong": false, "ExampleLongSoak": false,
	} {
		if got := IsLongName(name); got != want {
			t.Errorf("IsLongName(%q) = %v, want %v", name, got, want)
		}
	}
}
