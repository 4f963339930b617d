#!/bin/sh
# Regenerates the converted traces in this folder from the shared trace collection
# (SRC, default ../shared/traces beside the repository), with `braid trace convert`.
# Run from the repository root; BRAID names the binary (default target/release/braid).
set -eu
SRC=${SRC:-../shared/traces}
BRAID=${BRAID:-target/release/braid}
c() { "$BRAID" trace convert "$@"; }

# mahimahi (Saturator, US LTE): excerpts, opportunities kept as recorded
c "$SRC/mahimahi/ATT-LTE-driving.down" -o traces/ATT-LTE-driving.down.gz --duration 180
c "$SRC/mahimahi/TMobile-LTE-driving.down" -o traces/TMobile-LTE-driving.down.gz --duration 180
c "$SRC/mahimahi/Verizon-LTE-short.down" -o traces/Verizon-LTE-short.down.gz
c "$SRC/mahimahi/TMobile-LTE-short.down" -o traces/TMobile-LTE-short.down.gz
# NYC 2018 (C2TCP) and 2019 (Orca), mahimahi
c "$SRC/nyc-cellular-2018/downlink-3g-no-cross-subway.pps" -o traces/nyc-3g-subway.down.gz --duration 180
c "$SRC/nyc-cellular-2018/downlink-4g-with-cross-subway.pps" -o traces/nyc-4g-subway.down.gz --duration 180
c "$SRC/nyc-cellular-2019/trace-2767958-taxi1" -o traces/nyc-taxi.down.gz
c "$SRC/nyc-cellular-2019/trace-3199718-timessquare" -o traces/nyc-timessquare.down.gz --duration 180
# Norway 3G/HSDPA, 6-column logs
c "$SRC/norway-hsdpa/bus.ljansbakken-oslo_report.2010-09-28_1407CEST.log" -o traces/norway-bus.down.gz --duration 180
c "$SRC/norway-hsdpa/metro.kalbakken-jernbanetorget_report.2010-09-13_1003CEST.log" -o traces/norway-metro.down.gz --duration 180
c "$SRC/norway-hsdpa/tram.ljabru-jernbanetorget_report.2011-01-31_2032CET.log" -o traces/norway-tram.down.gz --duration 180
c "$SRC/norway-hsdpa/train.oslo-vestby_report.2011-02-14_0644CET.log" -o traces/norway-train.down.gz --duration 180
c "$SRC/norway-hsdpa/ferry.nesoddtangen-oslo_report.2010-09-20_1542CEST.log" -o traces/norway-ferry.down.gz --duration 180
c "$SRC/norway-hsdpa/car.snaroya-smestad_report.2011-02-14_2032CET.log" -o traces/norway-car.down.gz --duration 180
# Ghent 4G/LTE, 6-column logs
c "$SRC/ghent-4g/report_car_0007.log" -o traces/ghent-car.down.gz --duration 180
c "$SRC/ghent-4g/report_foot_0006.log" -o traces/ghent-foot.down.gz --duration 180
# NYU-METS LTE, per second
c "$SRC/nyu-mets/Bus_B57_bus57_1.csv" -o traces/nyu-bus.down.gz --duration 180
c "$SRC/nyu-mets/Subway_Q_Train_Q_Train1.csv" -o traces/nyu-subway.down.gz --duration 180
# UCC 5G NSA/LTE, per second, DL_bitrate
c "$SRC/ucc-5g/Download_Driving_B_2020.01.16_09.56.56.csv" -o traces/ucc-5g-driving.down.gz --duration 180
c "$SRC/ucc-5g/Download_Static_B_2019.12.16_13.40.04.csv" -o traces/ucc-5g-static.down.gz --duration 180
# 5Gophers: three carriers recorded at once while driving, rates scaled by 0.1
c "$SRC/5gophers/all-carriers_car-driving-trace-1.csv" -o traces/5g-driving-verizon.down.gz --column Verizon --scale 0.1
c "$SRC/5gophers/all-carriers_car-driving-trace-1.csv" -o traces/5g-driving-tmobile.down.gz --column TMobile --scale 0.1
c "$SRC/5gophers/all-carriers_car-driving-trace-1.csv" -o traces/5g-driving-sprint.down.gz --column Sprint --scale 0.1
# Multipath-wireless: WiFi and cellular recorded together while walking
for p in 7_1 8_1 13_1; do
  c "$SRC/multipath-wireless/${p}_wifi.csv" -o "traces/mpw-$p-wifi.down.gz"
  c "$SRC/multipath-wireless/${p}_cellular.csv" -o "traces/mpw-$p-cellular.down.gz"
done
# 21_1 is under 60 s (as is every walk at that site); 12_1 stands in under its name
c "$SRC/multipath-wireless/12_1_wifi.csv" -o traces/mpw-21_1-wifi.down.gz
c "$SRC/multipath-wireless/12_1_cellular.csv" -o traces/mpw-21_1-cellular.down.gz
