#!/usr/bin/env python3
"""Where a decode step's time goes between kernels, from the timeline build's stamps.

    tools/timeline.py STAMPS.csv [--steps N] [--csv OUT] [--room]

STAMPS.csv is what `zrun-cuda-timing -T` writes with kernels built by meson -Dtimeline=true
(src/cuda/timeline.h): the launches of the decode step the graph replays ("# launch I NAME
BLOCKS"), then one row per block of the last steps: its launch (%gridid), and %globaltimer when
the block reached griddepcontrol.wait, when the wait returned and (the kernels that stamp it;
else 0) when its last warp left.

A kernel's wait returns once the kernel before it has completed, so the first return in launch i
(W_i) is when launch i-1 was done. What the table gives each launch:
  - share: W_{i+1} - W_i, the step's time from launch i's start of real work to its completion
    (the launches' shares add up to the step);
  - early: W_i - the first block's arrival: how long launch i's first block was resident and
    waiting (its weight loads in flight) before it could go on; 0 where no block came early;
  - late: the last block's arrival - W_i: blocks that became resident only after the wait had
    released (a second wave, or no room beside the kernel before), each paying its loads then;
  - skew: the last wait's return - W_i;
  - run: the last block's exit - W_i (kernels that stamp exits), and gap: W_{i+1} - that exit,
    the time from launch i's last block leaving to launch i+1 going on (share = run + gap);
  - stage, sum, out (the kernels that mark two phases), each block's median time from its wait's
    return to its first mark, from there to its second, and from there to its exit: the products
    (zr_matvec) mark x staged and their first tile's items summed (warp 0); the CUDA-core decode
    attention (attention_decode.cu) marks q ready and its warps' sums in shared memory, so its
    out is the merge of its warps.
With --room, two more columns say how much of the GPU a launch held, which decides whether the
launch after it can be resident early (its blocks need a multiprocessor with room beside these):
  - sms: the multiprocessors its blocks ran on, of the ones any block of the file ran on;
  - free: the first time one of them had no block of it left (its last exit there - W_i): before
    that, a successor that does not fit beside its blocks has nowhere to go but the unused ones.
The step's last launch has no successor within the step (the next step may start after a host
gap), so its share is left out of the sums and shown as '-'.
Medians over up to N whole steps (default 4) before the newest one. Launches are named by position: the stamps
end with a whole step, whose last instance is the recorded step's last launch, and the graph's
node ids must repeat with the step's period."""
import argparse, statistics, sys

STALE_NS = 400000  # no block's exit comes later after its wait; a later one is stale (cu/timeline.cuh ZrTlExit)


def load(path):
    """The launches, and the kernel instances in the order they ran: (grid, stamps, first and
    last arrival, first and last wait return). A grid id is a graph node's, the same in every
    replay; the instances are told apart by time: every wait of an instance returns before any
    wait of the instance after it (that one waits for this one to complete, and a block arriving
    late returns from its wait at once), so in order of wait return an instance is a run of
    stamps of one grid. Each instance also carries its room: the last exit on each multiprocessor
    its blocks ran on (0 where none stamped an exit). Returns the launches, the instances and the
    number of multiprocessors the file shows (the largest id + 1)."""
    launches, recs = [], []
    with open(path) as f:
        for line in f:
            if line.startswith('# launch '):
                parts = line.split()
                launches.append((parts[3], int(parts[4])))
                continue
            if line.startswith('grid,') or not line.strip() or line.startswith('#'):
                continue
            f5 = [int(v) for v in line.strip().split(',')] + [0, 0, 0]
            g, sm, te, tw, tx, ts, tc = f5[0], f5[2], f5[3], f5[4], f5[5], f5[6], f5[7]
            if tx - tw > STALE_NS:  # a later step's warp raised this old record (cu/timeline.cuh)
                tx = 0
            # a block's phases (its two marks, then out)
            ph = (ts - tw, tc - ts, tx - tc) if tx and ts and tc else None
            recs.append((tw, te, g, tx, ph, sm))
    recs.sort(key=lambda r: r[:4])
    inst, phases, rooms = [], [], []
    for tw, te, g, tx, ph, sm in recs:
        if inst and inst[-1][0] == g:
            x = inst[-1]
            inst[-1] = (g, x[1] + 1, min(x[2], te), max(x[3], te), x[4], tw, max(x[6], tx))
        else:
            inst.append((g, 1, te, te, tw, tw, tx))
            phases.append([])
            rooms.append({})
        if ph:
            phases[-1].append(ph)
        rooms[-1][sm] = max(rooms[-1].get(sm, 0), tx)
    n_sms = 1 + max((r[5] for r in recs), default=-1)
    return launches, [i + (tuple(statistics.median(p[k] for p in ph) for k in range(3)) if ph else (None,) * 3, room)
                      for i, ph, room in zip(inst, phases, rooms)], n_sms


def analyse(launches, grids, n_steps):
    """Per launch index: lists over the chosen steps of (share, early, late, skew, stamps, run, gap); the
    stamps end with a whole step (its last instance is the recording's last launch)."""
    L = len(launches)
    if L == 0:
        raise SystemExit('timeline.py: no "# launch" lines: the stamps need the recorded step to be named')
    whole = len(grids) // L
    if whole < 2:
        raise SystemExit('timeline.py: %d kernel instances stamped, fewer than two steps of %d launches'
                         % (len(grids), L))
    # The newest steps that are whole: a step replays the same graph nodes (the grid ids repeat with
    # the step's period) and, while the rings still hold all of it, leaves about as many stamps a
    # launch as the newest step (at least half: an attention's blocks past the sequence leave none,
    # and their number changes with the position). The oldest stamps in the rings are partial (each multiprocessor's ring
    # wraps at its own pace), so steps are taken from the end until one differs. The newest step
    # is the reference and is not itself analysed (it may lack the next step's first wait).
    ref = grids[len(grids) - L:]
    if any(ref[i][0] == ref[i + 1][0] for i in range(L - 1)):
        raise SystemExit('timeline.py: the newest %d instances are not one step of the recorded launches' % L)
    good = 0
    while good < n_steps and (good + 2) * L <= len(grids):
        start = len(grids) - (good + 2) * L
        step = grids[start:start + L]
        if any(step[i][0] != ref[i][0] or 2 * step[i][1] < ref[i][1] for i in range(L)):
            break
        good += 1
    if good == 0:
        raise SystemExit('timeline.py: the step before the newest is not whole (its grid ids or stamp counts differ '
                         'from the newest step\'s): the stamps are not whole steps of the %d recorded launches' % L)
    n_steps = good
    first = len(grids) - (n_steps + 1) * L
    per = [[] for _ in range(L)]
    mismatched = 0
    for s in range(n_steps):
        for i in range(L):
            k = first + s * L + i
            g, n, te_min, te_max, tw_min, tw_max, tx_max, ph, room = grids[k]
            share = grids[k + 1][4] - tw_min if i + 1 < L else None
            early = max(0, tw_min - te_min)
            late = max(0, te_max - tw_min)
            run = tx_max - tw_min if tx_max else None
            gap = grids[k + 1][4] - tx_max if tx_max and i + 1 < L else None
            exits = [t for t in room.values() if t]
            free = min(exits) - tw_min if len(exits) == len(room) else None  # every one stamped its exit
            per[i].append((share, early, late, tw_max - tw_min, n, run, gap) + ph + (len(room), free))
            if n != launches[i][1]:
                mismatched += 1
    return per, n_steps, mismatched


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def us(ns):
    return '-' if ns is None else '%.2f' % (ns / 1000.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('stamps')
    ap.add_argument('--steps', type=int, default=4)
    ap.add_argument('--csv', help='also write the per-launch table as CSV here')
    ap.add_argument('--room', action='store_true', help='two more columns: the multiprocessors a launch held, and when the first emptied')
    a = ap.parse_args()
    launches, grids, n_sms = load(a.stamps)
    per, n_steps, mismatched = analyse(launches, grids, a.steps)
    L = len(launches)
    rows, room = [], []
    for i, (name, blocks) in enumerate(launches):
        col = list(zip(*per[i]))
        rows.append((i, name, blocks, med(col[4]), med(col[0]), med(col[1]), med(col[2]), med(col[3]), med(col[5]),
                     med(col[6]), med(col[7]), med(col[8]), med(col[9])))
        room.append((med(col[10]), med(col[11])))
    step = sum(r[4] for r in rows if r[4] is not None)
    print('%d launches a step, medians of %d steps; the shares add up to %.1f us (the last launch left out)'
          % (L, n_steps, step / 1000.0))
    if mismatched:
        print('note: %d of %d grids had a stamp count other than their block count (blocks that return before '
              'the wait, or kernels that wait twice)' % (mismatched, n_steps * L))
    extra = ' %9s %8s' % ('sms/%d' % n_sms, 'free') if a.room else ''
    print('%6s  %-34s %7s %7s %8s %8s %8s %8s %8s %8s %8s %8s %8s' % (
        'launch', 'kernel', 'blocks', 'stamps', 'share', 'early', 'late', 'skew', 'run', 'gap', 'stage', 'sum', 'out') + extra)
    for (i, name, blocks, n, share, early, late, skew, run, gap, st, sm, ou), (sms, free) in zip(rows, room):
        extra = ' %9d %8s' % (sms, us(free)) if a.room else ''
        print('%6d  %-34s %7d %7d %8s %8s %8s %8s %8s %8s %8s %8s %8s' % (
            i, name, blocks, n, us(share), us(early), us(late), us(skew), us(run), us(gap), us(st), us(sm), us(ou)) + extra)
    by = {}
    for i, name, blocks, n, share, early, late, skew, run, gap, st, sm, ou in rows:
        t = by.setdefault(name, [0, 0.0, 0, 0.0, 0])
        t[0] += 1
        if share is not None:
            t[1] += share
            t[2] += 1
        if gap is not None:
            t[3] += gap
            t[4] += 1
    print('\nby kernel (a step): launches, share us, mean share us, % of the step, mean gap us')
    for name, (cnt, tot, nt, gtot, ng) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print('  %-34s %4d %9.1f %8.2f %6.1f%% %8s' % (name, cnt, tot / 1000.0, tot / 1000.0 / max(nt, 1),
                                                      100.0 * tot / step if step else 0.0,
                                                      '%.2f' % (gtot / 1000.0 / ng) if ng else '-'))
    if a.csv:
        with open(a.csv, 'w') as f:
            f.write('launch,kernel,blocks,stamps,share_ns,early_ns,late_ns,skew_ns,run_ns,gap_ns,stage_ns,sum_ns,out_ns\n')
            for r in rows:
                f.write(','.join('' if v is None else v if isinstance(v, str) else '%.0f' % v for v in r) + '\n')


if __name__ == '__main__':
    main()
