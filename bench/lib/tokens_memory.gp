# A worker's memory against the corpus it trains from (bench/drivers/tokens_bench.sh, part 2).
# dat: "text_MB shard_MB VmRSS RssAnon RssFile cgroup_peak", each the largest of the workers' peaks, MiB.
set terminal pngcairo size 900,540 font ",11"
set output out
set title sprintf("4 workers on token shards, each capped at %d MiB: memory per worker as the corpus grows", cap)
set xlabel "corpus (MB of text; shards are half as many MB of uint16 tokens at 3.7 bytes per token)"
set ylabel "MiB per worker (the largest of the 4)"
set logscale x
set key at graph 0.02, graph 0.75 left top box opaque
set grid
set yrange [0:*]
plot dat using 1:4 with linespoints lw 2 title "private (RssAnon), peak", \
     dat using 1:3 with linespoints lw 2 title "resident (VmRSS), peak", \
     dat using 1:5 with linespoints lw 2 title "file pages mapped (libraries and shards, RssFile), peak", \
     dat using 1:6 with linespoints lw 2 title "cgroup charge (with page cache), peak", \
     cap with lines dt 2 lc rgb "red" title "the cap"
