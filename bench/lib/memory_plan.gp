# Peak RSS per worker against the memory plan's prediction, one point per
# (model, N, stage), for bench/drivers/memory_bound_bench.sh; the diagonal
# and +-10% around it.
# usage: gnuplot -e "dat='F'; out='P.png'" memory_plan.gp
set terminal pngcairo size 800,640 font ",10"
set output out
set xlabel "predicted per worker (MiB, shardline plan)"
set ylabel "measured peak RSS per worker (MiB)"
set logscale xy
set key top left
set grid
rows(model) = sprintf("< awk '$1==\"%s\"' %s", model, dat)
plot [40:5000][40:5000] \
  x w l lc rgb "black" t "measured = predicted", \
  1.1*x w l dt 2 lc rgb "gray" t "+-10%", 0.9*x w l dt 2 lc rgb "gray" notitle, \
  rows("fmnist_mlp") u 4:5 w p pt 7 t "MLP", \
  rows("fmnist_cnn") u 4:5 w p pt 5 t "CNN", \
  rows("fmnist_vit") u 4:5 w p pt 9 t "ViT", \
  rows("austen_gpt") u 4:5 w p pt 11 t "austen\\_gpt", \
  rows("gpt50m") u 4:5 w p pt 13 t "GPT 50.6M"
