import{b as t}from"./index-ErilaTZ1.js";function r(){return t("p",{class:"lead",children:"Not built yet."})}export{r as NewApp};
