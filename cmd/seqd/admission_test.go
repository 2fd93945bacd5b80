package main_test

import (
	"testing"
	"time"

	"github.com/seqd/seqd/internal/proctest"
)

// availableWithin is how long a group may go without a serving leader after
// two faults while a majority of its voters runs on its own data: raft
// alone elects in about a second, a new leader waits out the lease (1 s by
// default), and the restarted server needs a process start and one
// admission pass. Generous for a loaded CI machine; before admission by a
// majority the same steps left every group without a leader for over 30 s.
const availableWithin = 15 * time.Second

// A crash that meets a restart: one server is killed and started again
// and, at the same moment (before the restarted server has asked anyone to
// admit it) or a little after, group 0's leader is killed for good. The two
// servers left are a majority of every group's voters and run on their own
// current data, so every group must elect a serving leader again within
// the normal failover time, as raft alone would: the restarted server is
// admitted by the survivor, which was part of the running cluster all
// along (admit.ByMajority). Processes on the defaults: 3 servers, 3 groups.
func TestRestartMeetingACrashKeepsGroupsAvailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	for _, delay := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			ps := proctest.Start(t, 3)
			waitGroupsBalanced(t, ps[0], 3, time.Minute)
			g0 := routes(ps[0])[0].GetLeaderId()
			var leader, restarted, survivor *proctest.Proc
			for _, p := range ps {
				if p.ID == g0 {
					leader = p
				}
			}
			for _, p := range ps {
				if p == leader {
					continue
				}
				if restarted == nil {
					restarted = p
				} else {
					survivor = p
				}
			}
			restarted.Kill9()
			restarted.Start(t)
			time.Sleep(delay)
			leader.Kill9()
			start := time.Now()
			deadline := start.Add(availableWithin)
			for {
				rs := routes(survivor)
				ok := len(rs) == 3
				for _, g := range rs {
					ok = ok && g.GetServing() && g.GetLeaderId() != leader.ID
				}
				if ok {
					t.Logf("second kill %v after the restart: every group served again %v after it", delay, time.Since(start).Round(time.Millisecond))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("with %s and %s up (a majority, on their own data), groups %v lacked a serving leader %v after %s was killed; %s's log:\n%s",
						restarted.ID, survivor.ID, rs, availableWithin, leader.ID, restarted.ID, restarted.LogText())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// A full-cluster restart with a voter gone for good: every server is
// killed, and two of three start again on their own data. They are a
// majority of every group's voters, and each was current when it stopped
// (it had heard from a leader until then: its contact record says so), so
// they admit each other without the third's answer and every group serves
// again, without an operator's --assume-gone.
func TestFullRestartWithAVoterGoneKeepsGroupsAvailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	ps := proctest.Start(t, 3)
	waitGroupsBalanced(t, ps[0], 3, time.Minute)
	time.Sleep(1500 * time.Millisecond) // a contact record written while every server was current (every second)
	for _, p := range ps {
		p.Kill9()
	}
	start := time.Now()
	ps[0].Start(t)
	ps[1].Start(t)
	deadline := start.Add(availableWithin + 5*time.Second) // two process starts on top of the failover
	for {
		rs := routes(ps[0])
		ok := len(rs) == 3
		for _, g := range rs {
			ok = ok && g.GetServing()
		}
		if ok {
			t.Logf("every group served again %v after the two servers were started", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("with %s and %s up (a majority, on their own data), groups %v lacked a serving leader; %s's log:\n%s",
				ps[0].ID, ps[1].ID, rs, ps[0].ID, ps[0].LogText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
