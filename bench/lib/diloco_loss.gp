# Validation bits per byte against training seconds, one panel per link
# rate: synchronous training and each H (bench/drivers/diloco_bench.sh).
set terminal pngcairo size 1200,420 font ",10" noenhanced
set output out
n = words(rates)
# model: the title's name of the model (the driver's SETS change it)
if (!exists("model")) model = "austen_gpt"
set multiplot layout 1, n title model.", 2 sites of one worker: synchronous vs islands (DiLoCo)"
do for [i = 1:n] {
  r = word(rates, i)
  set title r
  set xlabel "training seconds"
  set ylabel "validation bits per byte"
  set yrange [*:*]  # the curves' own range: a larger model's or a short run's lie elsewhere
  set key top right
  plot sprintf("%s/%s/sync/curve.dat", dir, r) using 1:2 with linespoints title "sync", \
       for [h in hs] sprintf("%s/%s/h%s/curve.dat", dir, r, h) using 1:2 with linespoints title "H=".h
}
unset multiplot
