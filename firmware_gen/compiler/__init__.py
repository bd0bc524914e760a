"""The compiler: the reservation table every scheduler places through, the FFN, tray, MoE-tray and resident compilers, the multi-tile scheduler and tile fitting."""
