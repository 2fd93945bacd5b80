package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPU is the CPU time (user and system, from /proc on Linux) used during
// the measured part of a run: by the process running the load generator
// (the load generator and the client under test) and by the server
// processes Config.CPUPIDs names, with the same per id.
type CPU struct {
	ClientSeconds float64 `json:"client_s"`
	ServerSeconds float64 `json:"server_s"`
	ClientUsPerID float64 `json:"client_us_per_id"`
	ServerUsPerID float64 `json:"server_us_per_id"`
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// cpuSeconds returns the CPU time process pid (0: this process) has used,
// and false if /proc cannot tell (not Linux, or the process is gone).
func cpuSeconds(pid int) (float64, bool) {
	p := "/proc/self/stat"
	if pid > 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis: utime and stime are the 14th
	// and 15th fields, the 12th and 13th after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(u+k) / clockTicks, true
}

// cpuSample is the CPU time of this process and of pids at one instant.
type cpuSample struct {
	client, server float64
	ok             bool
}

func sampleCPU(pids []int) cpuSample {
	c, ok := cpuSeconds(0)
	s := cpuSample{client: c, ok: ok}
	for _, p := range pids {
		v, ok := cpuSeconds(p)
		s.server += v
		s.ok = s.ok && ok
	}
	return s
}

// cpuBetween is the CPU used between a and b for ids ids; nil if either
// sample failed.
func cpuBetween(a, b cpuSample, ids int64) *CPU {
	if !a.ok || !b.ok {
		return nil
	}
	u := &CPU{ClientSeconds: b.client - a.client, ServerSeconds: b.server - a.server}
	if ids > 0 {
		u.ClientUsPerID = u.ClientSeconds * 1e6 / float64(ids)
		u.ServerUsPerID = u.ServerSeconds * 1e6 / float64(ids)
	}
	return u
}

// ParsePIDs parses a comma-separated list of process IDs ("" is none).
func ParsePIDs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("process ID %q is not a positive whole number", f)
		}
		out = append(out, p)
	}
	return out, nil
}
