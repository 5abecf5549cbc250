"""The simulator and capacity planner: the admission engine on a virtual clock.

    jobs        what one trace row is (pod sets, runtime, checkpoints) and its engine workload
    trace       reading a trace (CSV or JSONL), every problem named by file, line and field
    generator   upstream Kueue's scheduler-performance generator files, built as upstream does
    yamlpaths   YAML with a line number per field path, for located messages
    design      the queue objects of one quota design, loaded into an engine state, and the
                checks that every job can run there at all
    driver      the event loop: arrivals, settled scheduling cycles, preemption losses, completions
    federation  a MultiKueue manager design and its workers' designs (--cluster), checked together
    dispatch    MultiKueue's choices: which workers get a copy (all at once, incremental), who wins
    multicluster the event loop over a manager and its workers, one engine each
    cluster_metrics per-cluster usage, jobs and the split wait of a MultiKueue run
    metrics     what a run records and the JSON summary (with upstream's checker figures)
    svg         small inline-SVG charts (no network, no plotting library)
    report_html the self-contained HTML report of one run
    tables      the rich terminal tables
    plan        two designs on one trace, side by side
    checker     upstream's checker rules (rangespec.yaml) on a summary

The simulator never computes quota itself: it feeds the engine (`pykueue.engine`)
and reads back its decisions, exactly as the controllers do.
"""
