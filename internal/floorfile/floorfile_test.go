package floorfile

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

type floor struct {
	line       int
	key, floor uint64
}

func scanAll(t *testing.T, text string) ([]floor, error) {
	t.Helper()
	var got []floor
	err := Scan(strings.NewReader(text), func(line int, key, f uint64) error {
		got = append(got, floor{line, key, f})
		return nil
	})
	return got, err
}

func TestScan(t *testing.T) {
	got, err := scanAll(t, "# key floor\n\n1001 52000\r\n  1002\t17  \n   # indented comment\n18446744073709551615 9223372036854775807\n1001 3")
	if err != nil {
		t.Fatal(err)
	}
	want := []floor{{3, 1001, 52000}, {4, 1002, 17}, {6, 1<<64 - 1, 1<<63 - 1}, {7, 1001, 3}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("floor %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestScanMalformed: a malformed line is named by its number, and no line
// from it on reaches fn.
func TestScanMalformed(t *testing.T) {
	for name, c := range map[string]struct {
		text  string
		line  int
		calls int
	}{
		"one field":          {"1 2\n3\n4 5\n", 2, 1},
		"three fields":       {"1 2 3\n", 1, 0},
		"a negative key":     {"1 1\n2 2\n-3 3\n", 3, 2},
		"a key too large":    {"18446744073709551616 1\n", 1, 0},
		"a floor above 2^63": {"1 9223372036854775808\n", 1, 0},
		"a floor in hex":     {"1 0x10\n", 1, 0},
		"a comma":            {"1,2\n", 1, 0},
		"a trailing comment": {"1 2 # two\n", 1, 0},
		"a line too long":    {"1 2\n" + strings.Repeat("9", MaxLine+1) + " 1\n3 4\n", 2, 1},
	} {
		got, err := scanAll(t, c.text)
		var le *LineError
		if !errors.As(err, &le) || !errors.Is(err, ErrMalformed) || le.Line != c.line {
			t.Errorf("%s: %v, want a malformed line %d", name, err, c.line)
			continue
		}
		if len(got) != c.calls {
			t.Errorf("%s: %d floors passed on, want the %d before line %d only", name, len(got), c.calls, c.line)
		}
		if !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: the error %q does not name the line", name, err)
		}
	}
}

// TestScanStreams: floors reach fn as they are read, a byte at a time, and
// an error from fn stops the scan.
func TestScanStreams(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Scan(iotest.OneByteReader(strings.NewReader("1 1\n2 2\n3 3\n")), func(int, uint64, uint64) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("Scan = %v after %d floors, want fn's error after 2", err, n)
	}
}
