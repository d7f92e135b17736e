# Peak RSS per worker against N, measured (points) and predicted (dashed),
# for bench/drivers/zero3_memory_bench.sh.
# usage: gnuplot -e "dat='F'; out='P.png'" zero3_memory.gp
set terminal pngcairo size 1100,480 font ",10"
set output out
set multiplot layout 1,2
set xlabel "workers N"
set ylabel "peak RSS per worker (MiB)"
set xtics (1, 2, 4)
set logscale x 2
set key top right
set grid
# The rows of one series, in N order.
rows(size, stage, remat) = sprintf("< awk '$1==\"%s\" && $3==%d && $4==\"%s\"' %s", size, stage, remat, dat)
do for [size in "small big"] {
  set title (size eq "small" ? "austen\\_gpt (0.84M parameters)" : "GPT, 50.6M parameters")
  plot \
    rows(size, 2, "false") u 2:5 w p pt 7 lc 1 t "stage 2", \
    rows(size, 2, "false") u 2:6 w l dt 2 lc 1 t "stage 2 predicted", \
    rows(size, 2, "true") u 2:5 w p pt 4 lc 4 t "stage 2 + remat", \
    rows(size, 2, "true") u 2:6 w l dt 2 lc 4 t "stage 2 + remat predicted", \
    rows(size, 3, "false") u 2:5 w p pt 7 lc 2 t "stage 3", \
    rows(size, 3, "false") u 2:6 w l dt 2 lc 2 t "stage 3 predicted", \
    rows(size, 3, "true") u 2:5 w p pt 5 lc 3 t "stage 3 + remat", \
    rows(size, 3, "true") u 2:6 w l dt 2 lc 3 t "stage 3 + remat predicted"
}
unset multiplot
