
# --- PostScript: grops (man pages), enscript, Ghostscript ps2write/eps2write ---
for m in ls cp tar gzip; do zcat -f "$(man -w $m)" | groff -man -Tps > groff-man-$m.ps; done
enscript -q -p enscript-gzip-README.ps /usr/share/doc/gzip/README*
enscript -q -2r -p enscript-2up-copyright.ps /usr/share/doc/coreutils/copyright
cat > shapes.ps <<'PS'
%!
/Helvetica findfont 24 scalefont setfont
72 720 moveto (gpucarve thin corpus) show
newpath 300 400 120 0 360 arc 0.2 0.4 0.8 setrgbcolor fill
newpath 100 100 moveto 500 150 lineto 300 600 lineto closepath 0.9 0.5 0.1 setrgbcolor 4 setlinewidth stroke
showpage
PS
gs -q -dNOPAUSE -dBATCH -sDEVICE=ps2write -sOutputFile=gs-ps2write-shapes.ps shapes.ps
gs -q -dNOPAUSE -dBATCH -sDEVICE=eps2write -sOutputFile=gs-eps2write-shapes.eps shapes.ps
