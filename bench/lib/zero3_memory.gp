# Peak RSS per worker against N, measured (points) and predicted (lines),
# for bench/drivers/zero3_memory_bench.sh. usage: gnuplot -e "dat='F'; out='P.png'" zero3_memory.gp
set terminal pngcairo size 1100,480 font ",10"
set output out
set multiplot layout 1,2
set xlabel "workers N"
set ylabel "peak RSS per worker (MiB)"
set xtics (1, 2, 4)
set logscale x 2
set key top right
set grid
do for [size in "small big"] {
  set title (size eq "small" ? "austen\\_gpt (0.84M parameters)" : "GPT, 50.6M parameters")
  plot \
    dat u (strcol(1) eq size && $3 == 2 && strcol(4) eq "false" ? $2 : 1/0):5 w p pt 7 lc 1 t "stage 2", \
    dat u (strcol(1) eq size && $3 == 2 && strcol(4) eq "false" ? $2 : 1/0):6 smooth unique w l dt 2 lc 1 t "stage 2 predicted", \
    dat u (strcol(1) eq size && $3 == 3 && strcol(4) eq "false" ? $2 : 1/0):5 w p pt 7 lc 2 t "stage 3", \
    dat u (strcol(1) eq size && $3 == 3 && strcol(4) eq "false" ? $2 : 1/0):6 smooth unique w l dt 2 lc 2 t "stage 3 predicted", \
    dat u (strcol(1) eq size && $3 == 3 && strcol(4) eq "true" ? $2 : 1/0):5 w p pt 5 lc 3 t "stage 3 + remat", \
    dat u (strcol(1) eq size && $3 == 3 && strcol(4) eq "true" ? $2 : 1/0):6 smooth unique w l dt 2 lc 3 t "stage 3 + remat predicted"
}
unset multiplot
