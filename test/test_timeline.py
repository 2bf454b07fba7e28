#!/usr/bin/env python3
"""tools/timeline.py on stamps whose answer is known: three launches a step (2, 1 and 2 blocks),
three steps; the oldest step is left out, the shares and arrivals are the ones built in below."""
import os, subprocess, sys, tempfile

script = sys.argv[1]
failed = 0


def check(what, ok):
    global failed
    print('%s: %s' % ('ok' if ok else 'FAIL', what))
    failed += not ok


def stamps(n_steps):
    lines = ['# launch 0 matvec_q4_k 2', '# launch 1 attn_decode_f32 1', '# launch 2 matvec_q8_0 2',
             'grid,block,sm,t_enter_ns,t_wait_ns,t_exit_ns,t_staged_ns,t_summed_ns']
    for s in range(n_steps):
        b, g = 100000 * s, 0  # a graph node's grid id is the same in every replay
        # A: resident 1 us before its wait returns; B: 2.1 us early; C: one block 1 us late
        # exits: A's last block leaves at 2.4 us (run 1.4, gap 0.6); B stamps none
        # A's blocks stage x in 0.2 / 0.4 us, sum in 0.5 / 0.7 (medians 0.3, 0.6), leave 0.3 / 0.5 after
        lines += ['%d,0,0,%d,%d,%d,%d,%d' % (g + 1, b, b + 1000, b + 2000, b + 1200, b + 1700),
                  '%d,1,1,%d,%d,%d,%d,%d' % (g + 1, b + 100, b + 1100, b + 2400, b + 1500, b + 2200),
                  '%d,0,2,%d,%d,%d' % (g + 2, b + 900, b + 3000, b + 3000 + 400001),  # raised by a later step: no exit
                  '%d,0,3,%d,%d,%d' % (g + 3, b + 3500, b + 4000, b + 4500),
                  '%d,1,3,%d,%d,%d' % (g + 3, b + 5000, b + 5200, b + 5600)]
    return '\n'.join(lines) + '\n'


with tempfile.TemporaryDirectory() as d:
    src, out = os.path.join(d, 'stamps.csv'), os.path.join(d, 'table.csv')
    with open(src, 'w') as f:
        f.write(stamps(3))
    r = subprocess.run([sys.executable, script, src, '--csv', out], capture_output=True, text=True)
    check('runs (%s)' % r.stderr.strip(), r.returncode == 0)
    check('2 steps used, shares add up to 3.0 us', 'medians of 2 steps; the shares add up to 3.0 us' in r.stdout)
    rows = [l.split(',') for l in open(out).read().split('\n')[1:] if l]
    want = [['0', 'matvec_q4_k', '2', '2', '2000', '1000', '0', '100', '1400', '600', '300', '600', '250'],
            ['1', 'attn_decode_f32', '1', '1', '1000', '2100', '0', '0', '', '', '', '', ''],
            ['2', 'matvec_q8_0', '2', '2', '', '500', '1000', '1200', '1600', '', '', '', '']]
    check('per-launch table %s' % rows, rows == want)
    check('by kernel: matvec_q4_k 66.7% of the step', 'matvec_q4_k' in r.stdout and '66.7%' in r.stdout)
    # the rings' oldest step lost launch B's stamp (each multiprocessor's ring wraps at its own
    # pace): only the whole steps after it are taken, with the same table
    with open(src, 'w') as f:
        f.write(stamps(4).replace('\n2,0,2,900,3000,403001\n', '\n'))
    r = subprocess.run([sys.executable, script, src, '--csv', out], capture_output=True, text=True)
    rows = [l.split(',') for l in open(out).read().split('\n')[1:] if l]
    check('a partial oldest step is left out (%s)' % r.stderr.strip(),
          r.returncode == 0 and 'medians of 2 steps' in r.stdout and rows == want)
    # --room: A's blocks ran on SMs 0 and 1, the first to empty at 2.0 us (1.0 after A's wait);
    # B's one block on SM 2 has no exit stamped (stale): no time; C's two on SM 3, the last out
    # at 5.6 us (1.6 after its wait); four SMs in the file
    with open(src, 'w') as f:
        f.write(stamps(3))
    r = subprocess.run([sys.executable, script, src, '--room'], capture_output=True, text=True)
    tails = [l.split()[-2:] for l in r.stdout.split('\n') if l[:6].strip() in ('0', '1', '2')]
    check('--room: sms and first free %s' % tails,
          r.returncode == 0 and 'sms/4' in r.stdout and tails == [['2', '1.00'], ['1', '-'], ['1', '1.60']])
    with open(src, 'w') as f:
        f.write(stamps(1))
    r = subprocess.run([sys.executable, script, src], capture_output=True, text=True)
    check('one step is refused with a reason', r.returncode != 0 and 'fewer than two steps' in r.stderr)
    with open(src, 'w') as f:
        f.write(stamps(3).replace('\n2,0,2,200900,', '\n9,0,2,200900,'))
    r = subprocess.run([sys.executable, script, src], capture_output=True, text=True)
    check('a step of other nodes is refused', r.returncode != 0 and 'not whole steps' in r.stderr)
print('%d failed' % failed)
sys.exit(1 if failed else 0)
