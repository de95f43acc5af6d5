# Written by `make install` (the libdir it installed libvkgrad.so.0 into);
# None in a checkout.
LIBDIR = None
